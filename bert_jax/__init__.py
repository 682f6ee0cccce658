"""bert-jax: BERT in JAX/Flax, TPU-first, with the reference's formats and flags."""

import os

# gs:// paths go through etils.epath. Left to itself epath picks tf.io.gfile whenever TensorFlow
# is installed and gcsfs otherwise; one backend, whatever else is installed, means one set of
# behaviours and the standard endpoint variable (STORAGE_EMULATOR_HOST) is honoured everywhere.
# Set EPATH_USE_TF=true before importing bert_jax to choose tf.io.gfile instead.
os.environ.setdefault("EPATH_USE_TF", "false")

__version__ = "0.1.0"
