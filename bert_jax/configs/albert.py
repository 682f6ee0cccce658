"""ALBERT pretraining (Lan et al. 2019): factorised embeddings (E=128), every layer shared,
masked LM on n-gram spans (n <= 3, P(n) proportional to 1/n) + sentence-order prediction,
LAMB, no dropout.

  bert-jax create-pretraining-data --objective=sop --input_file=embedded:2000 \
      --output_dir=/tmp/albert-data --vocab_file=VOCAB --max_seq_length=512
  bert-jax pretrain --config albert.py:base --workdir /tmp/albert \
      --config.train_files='/tmp/albert-data/shard-*.tfrecord' --config.vocab_file=VOCAB

Presets: `base` (L12 H768, 12M parameters), `large` (L24 H1024, 18M), `xlarge` (L24 H2048, heads of
64) with the paper's recipe (batch 4096, LAMB lr 0.00176, 3125 warmup steps, 125k steps, seq 512),
and `cpu` (L2 H128, the shards' seq, batch 32, LAMB lr 5e-3, 3000 steps). Expected: the paper's
ALBERT-base averages 80.1 (SQuAD 1.1/2.0, MNLI, SST-2, RACE); SOP accuracy 86.5. `cpu`, measured by
`python experiments/family_learning.py --families albert` (3 MB of the embedded corpus, a 4000-token
vocab, 3000 steps, about 15 minutes with other jobs on the machine): held-out masked-LM accuracy
0.144 against 0.049 for the most frequent target on the same n-gram masks, sentence order 0.580 on
1325 held-out pairs against 0.536 for the majority order (a binomial std of 1.4 points);
tests/test_family_learning.py runs 400 steps (masked LM only). The shards' masks are n-grams whether
written statically or drawn dynamically (tests/test_ngram_masking.py). TPU fit
(experiments/tpu_family_table.md, scan_layers=True, remat_policy=full): base on v4-32 with
grad_accum_steps=2 in 7.04 of 32 GiB per chip, large on v4-32 with 4 in 6.10 GiB, xlarge on v4-64
with 4 in 6.18 GiB.
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import pretrain_config

_MODELS = {"base": "base", "large": "large", "xlarge": "L24-H2048-A32", "cpu": "tiny"}


def get_config(preset: str = "base") -> ml_collections.ConfigDict:
    if preset not in _MODELS:
        raise ValueError(f"albert preset {preset!r}: use one of {', '.join(_MODELS)}")
    c = pretrain_config(_MODELS[preset])
    c.family = "albert"
    c.objective = "mlm_sop"
    c.optimizer = "lamb"
    c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.0
    c.max_seq_length, c.max_predictions_per_seq = 512, 20
    c.global_batch_size = 4096
    c.learning_rate, c.warmup_steps, c.train_steps = 0.00176, 3125, 125_000
    c.schedule = "linear"
    if preset == "cpu":
        c.dtype = "float32"
        # None: the shards' (stats.json, else their first record), as pretrain_cpu.py; a value
        # given on the command line is checked against them (bert_jax/input/geometry.py)
        unset = ml_collections.FieldReference
        c.max_seq_length = unset(None, field_type=int)
        c.max_predictions_per_seq = unset(None, field_type=int)
        c.global_batch_size, c.learning_rate, c.warmup_steps, c.train_steps = 32, 5e-3, 100, 3000
        c.log_every_steps, c.eval_every_steps, c.checkpoint_every_steps = 50, 500, 500
        c.max_eval_steps = 20
        c.mesh.data, c.mesh.fsdp = 1, 1
    return c
