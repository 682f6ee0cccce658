"""bert-jax: BERT in JAX/Flax, TPU-first, with the reference's formats and flags."""

import os

# gs:// paths go through etils.epath. Left to itself epath picks tf.io.gfile whenever TensorFlow
# is installed and gcsfs otherwise; one backend, whatever else is installed, means one set of
# behaviours and the standard endpoint variable (STORAGE_EMULATOR_HOST) is honoured everywhere.
# Set EPATH_USE_TF=true before importing bert_jax to choose tf.io.gfile instead.
os.environ.setdefault("EPATH_USE_TF", "false")

# XLA's RngBitGenerator (config.dropout_prng rbg or unsafe_rbg; unsafe_rbg is the TPU default)
# draws each device's own share of a batch-sharded dropout mask only with this libtpu flag:
# without it every device draws the bits of the whole global batch and keeps its slice (4x the
# bits on a v4-8, N x on N devices). The masks then depend on the mesh, as unsafe_rbg's do anyway.
# libtpu reads the variable when it starts, so it is set before JAX meets a TPU; a value already
# given for the flag is kept.
_RBG_PER_DEVICE = "--xla_tpu_spmd_rng_bit_generator_unsafe"
if _RBG_PER_DEVICE not in os.environ.get("LIBTPU_INIT_ARGS", ""):
    os.environ["LIBTPU_INIT_ARGS"] = " ".join(
        filter(None, (os.environ.get("LIBTPU_INIT_ARGS", ""), f"{_RBG_PER_DEVICE}=true"))
    )

__version__ = "0.1.0"
