"""CoNLL-2003 NER fine-tuning: tag on each word's first sub-token, entity-level F1 (seqeval).

  bert-jax finetune --config ner.py --workdir /tmp/ner \
      --config.init_checkpoint=/path/to/cased_L-12_H-768_A-12 --config.do_lower_case=False \
      --config.data_dir=/path/to/conll2003

data_dir holds train.txt, valid.txt (CoNLL columns `word POS chunk NER`); --config.use_tfds=True
reads tfds `conll2003` instead. eval_results.json: micro entity F1/precision/recall in seqeval's
default (conlleval-compatible) mode, or --config.strict=True for IOB2 strict mode;
dev_predictions.txt has `word gold predicted` columns.

Expect (BERT-base cased, paper Table 7): dev F1 96.4 (test 92.4), without document context.
--config.feature_based=True is the paper's feature-based variant: frozen features (concat of the
last four layers) feeding a trained 2-layer BiLSTM (--config.lstm_size, paper 768; lr ~1e-3);
paper: dev F1 96.1 with BERT-base.
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import finetune_config


def get_config() -> ml_collections.ConfigDict:
    return finetune_config("ner")  # lr 5e-5, 3 epochs
