"""ELECTRA pretraining (Clark et al. 2020): a generator 1/4 the discriminator's width (same
depth, shared embeddings) and the discriminator in one jitted step; 85% [MASK] / 15% kept, no
random tokens; loss = generator MLM + 50 x replaced-token detection over all real tokens.

  bert-jax create-pretraining-data --objective=electra --input_file=embedded:2000 \
      --output_dir=/tmp/electra-data --vocab_file=VOCAB --max_seq_length=128 \
      --max_predictions_per_seq=20
  bert-jax pretrain --config electra.py:small --workdir /tmp/electra \
      --config.train_files='/tmp/electra-data/shard-*.tfrecord' --config.vocab_file=VOCAB

Presets: `small` (L12 H256 A4, E=128: the paper's ELECTRA-Small, seq 128, batch 128, lr 5e-4,
10k warmup, 1M steps), `base` (L12 H768, E=768, generator 1/3, batch 256, lr 2e-4, seq 512 as
the code comments), `large` (L24 H1024, E=1024, batch 2048, lr 2e-4; the code's mask 0.25 is
set by create-pretraining-data's --masked_lm_prob), and `cpu` (L2 H128, batch 32, the shards'
max_seq_length and max_predictions_per_seq).
The base/large step counts (766k, 400k) are from memory of the paper, not checked here.
Expected: the paper's GLUE dev 79.9 (small), 85.1 (base). CPU: `cpu` on 400 KB of the embedded
corpus, 300 steps at constant lr 2e-3, reached held-out generator accuracy 0.110 (unigram
0.043) and discriminator loss 0.4075 below the best constant prediction's 0.4134, with accuracy
0.8553 equal to the all-original baseline (tests/test_electra.py); it needs more steps to say
"replaced" with confidence. The discriminator is exported (export_hf_dir) as
ElectraForPreTraining, the generator under <export_hf_dir>/generator as ElectraForMaskedLM;
fine-tuning loads the discriminator from either the export or the workdir; the paper's
layer-wise learning-rate decay is `--config.layerwise_lr_decay=0.8` (0.9 for large) on any
fine-tuning config. TPU fit (experiments/tpu_family_table.md, scan_layers=True): small on v4-8
in 1.57 of 32 GiB per chip; base on v4-8 with remat_policy=full in 4.64 GiB; large on v4-32
with grad_accum_steps=2 and remat_policy=full in 7.69 GiB.
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import pretrain_config

_PRESETS = {
    # model preset, embedding_size, generator size, seq, batch, lr, warmup, steps
    "small": ("L12-H256-A4", 128, 0.25, 128, 128, 5e-4, 10_000, 1_000_000),
    "base": ("base", None, 1 / 3, 512, 256, 2e-4, 10_000, 766_000),
    "large": ("large", None, 0.25, 512, 2048, 2e-4, 10_000, 400_000),
    "cpu": ("tiny", None, 0.25, 64, 32, 2e-3, 0, 3000),
}


def get_config(preset: str = "small") -> ml_collections.ConfigDict:
    if preset not in _PRESETS:
        raise ValueError(f"electra preset {preset!r}: use one of {', '.join(_PRESETS)}")
    model, emb, gen, seq, batch, lr, warmup, steps = _PRESETS[preset]
    c = pretrain_config(model)
    c.family = c.objective = "electra"
    c.embedding_size = emb
    c.generator_size = gen
    c.max_seq_length = seq
    c.max_predictions_per_seq = int((0.15 + 0.005) * seq)  # as ELECTRA's configure_pretraining
    c.global_batch_size = batch
    c.learning_rate = lr
    c.warmup_steps = warmup
    c.train_steps = steps
    c.schedule = "linear"
    if preset == "cpu":
        c.dtype = "float32"
        c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.0
        # None: the shards' (stats.json, else their first record), as pretrain_cpu.py; a value
        # given on the command line is checked against them (bert_jax/input/geometry.py)
        unset = ml_collections.FieldReference
        c.max_seq_length = unset(None, field_type=int)
        c.max_predictions_per_seq = unset(None, field_type=int)
        c.schedule = "constant"
        c.log_every_steps = 50
        c.eval_every_steps = c.checkpoint_every_steps = 500
        c.max_eval_steps = 20
        c.mesh.data, c.mesh.fsdp = 1, 1
    return c
