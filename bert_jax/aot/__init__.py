"""Ahead-of-time compilation for TPU slices on any machine (libtpu's compile-only devices).

- `bert_jax.aot.topology`: slice names (`v4-32`, `v5e:4x4`) -> devices, HBM, peak FLOP/s
  (imports no JAX, so tpu_setup/ can use it on a laptop).
- `bert_jax.aot.fit`: compile a jitted step, memory per device vs HBM, FLOPs, unsharded params.
- `bert_jax.aot.pretraining`: the `bert-jax pretrain` step for a config on a slice, and the
  start-of-run check `check_trainer_fits` (passed to the loop as its preflight).
"""
