"""BERT pretraining, phase 1 of the paper's recipe (128 tokens), for any model preset.

  bert-jax pretrain --config pretrain.py:base --workdir gs://BUCKET/base-p1 \
      --config.train_files='gs://BUCKET/shards/train-*.tfrecord' \
      --config.eval_files='gs://BUCKET/shards/eval-*.tfrecord' --config.vocab_file=vocab.txt

The argument is a model preset: tiny, mini, small, medium, base, large, or L<layers>-H<hidden>.
Defaults are the paper's (Devlin et al. 2019, section A.2): batch 256 x 128 tokens, Adam
lr 1e-4 with 10k warmup steps then linear decay, weight decay 0.01, dropout 0.1; 1M steps in
all, of which 90% at 128 tokens (this file, 900k steps) and 10% at 512 tokens
(pretrain_phase2.py, initialised from this workdir). For BERT-large use
`pretrain.py:large` (same recipe). Shards: `bert-jax create-pretraining-data` with
--max_seq_length=128 --max_predictions_per_seq=20.

Expected result: masked-LM accuracy on held-out shards rising towards the ~0.7 reported for
BERT-base-sized models on Wikipedia + books (MLPerf's BERT-large target is 0.720 at 512 tokens);
no run of this file has been recorded yet, so no wall-clock time is claimed.
Any key can be overridden: --config.global_batch_size=1024 --config.optimizer=lamb ...
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import pretrain_config


def get_config(preset: str = "base") -> ml_collections.ConfigDict:
    return pretrain_config(preset)
