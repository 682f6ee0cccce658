"""BERT pretraining, phase 2 of the paper's recipe: 512 tokens, initialised from phase 1.

  bert-jax pretrain --config pretrain_phase2.py:base \
      --workdir gs://BUCKET/base-p2 --config.init_checkpoint=gs://BUCKET/base-p1 \
      --config.train_files='gs://BUCKET/shards512/train-*.tfrecord' --config.vocab_file=vocab.txt

The last 10% of the paper's 1M steps (100k) at 512 tokens with max_predictions_per_seq 80
(shards from `bert-jax create-pretraining-data --max_seq_length=512
--max_predictions_per_seq=80`), batch 256, lr 1e-4 with a fresh 10k-step warmup (as
google-research/bert's README describes running phase 2 as a second invocation). Weights come
from the phase-1 workdir (its latest checkpoint; the optimizer state starts fresh, as the
reference's init_checkpoint). `--config.export_hf_dir=DIR` writes a Hugging Face model at the end.

Expected result: held-out masked-LM accuracy slightly above the end of phase 1; MLPerf's
BERT-large target at 512 tokens is 0.720. No recorded run yet, so no time is claimed.
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import pretrain_config


def get_config(preset: str = "base") -> ml_collections.ConfigDict:
    c = pretrain_config(preset)
    c.max_seq_length = 512
    c.max_predictions_per_seq = 80
    c.train_steps = 100_000
    c.warmup_steps = 10_000
    return c
