"""SWAG multiple choice (paper section 4.4): 3 epochs, lr 2e-5, batch 16, one pass per ending.

  bert-jax finetune --config swag.py --workdir /tmp/swag \
      --config.init_checkpoint=/path/to/bert --config.data_dir=/path/to/swagaf/data

data_dir holds train.csv and val.csv (the dataset's columns: sent1, sent2, ending0..3, label).
eval_results.json: dev accuracy; dev_predictions.tsv: the chosen ending per example.

Expect (paper Table 4): BERT-base dev accuracy 81.6, BERT-large 86.6.
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import finetune_config


def get_config() -> ml_collections.ConfigDict:
    c = finetune_config("swag")
    c.learning_rate = 2e-5
    c.train_batch_size = 16
    c.num_train_epochs = 3.0
    return c
