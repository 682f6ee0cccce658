"""SQuAD v1.1 / v2.0 fine-tuning (run_squad.py): seq 384, stride 128, query 64, n-best 20.

  bert-jax finetune --config squad.py:v1.1 --workdir /tmp/squad11 \
      --config.init_checkpoint=/path/to/bert --config.data_dir=/path/to/squad \
      --config.learning_rate=3e-5 --config.num_train_epochs=2 --config.train_batch_size=12

data_dir holds train-v1.1.json and dev-v1.1.json (v2.0: train-v2.0.json, dev-v2.0.json). The
workdir gets predictions.json, nbest_predictions.json, (v2.0) null_odds.json, and
eval_results.json with the official EM/F1 (v2.0 also HasAns/NoAns and best_f1_thresh; set
--config.null_score_diff_threshold to the tuned value, typically -1 .. -5). data_stats.json
counts skipped training answers and truncated questions.

Expect (BERT-base uncased, README): v1.1 dev F1 88.4 / EM 81.3 with lr 3e-5, batch 12, 2 epochs;
v2.0 (base) about 72.6 EM / 75.7 F1.
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import finetune_config


def get_config(version: str = "v1.1") -> ml_collections.ConfigDict:
    if version not in ("v1.1", "v2.0"):
        raise ValueError(f"squad.py:{version}: use v1.1 or v2.0")
    c = finetune_config("squad")
    c.version = version
    c.train_file = f"train-{version}.json"
    c.predict_file = f"dev-{version}.json"
    if version == "v2.0":
        c.num_train_epochs = 2.0
    return c
