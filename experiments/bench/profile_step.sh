#!/usr/bin/env bash
# The profile kit on a lent NVIDIA GPU, in one call: installs what the machine's image lacks,
# then runs experiments/bench/profile_step.py (its docstring says what it measures).
#
#   bash experiments/bench/profile_step.sh OUT_DIR [profile_step.py flags ...]
#
# The GPU image holds jax (CUDA), flax, optax, orbax, torch and transformers but not grain,
# ml_collections, tensorboardX, seqeval, google-crc32c, array_record or portpicker, and reaches
# no index. Download their wheels here first (Python 3.12, x86-64), into .whl/ beside the repo's
# files, ignored by git and carried to the device (`carry: [".whl"]`):
#   echo /.whl/ >> .git/info/exclude
#   for p in grain==0.2.18 array_record==0.8.6 portpicker ml_collections==1.1.0 \
#            tensorboardX==2.6.5 seqeval==1.2.2 google-crc32c==1.9.0; do
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 -d .whl "$p"
#   done
# (seqeval ships no wheel: build one with `pip wheel --no-deps -w .whl seqeval==1.2.2`.)
# bert_jax is imported from the working tree (PYTHONPATH), not installed: the image's jax is
# newer than pyproject's pin, and a pip install would try to replace it.
set -euo pipefail
out="${1:?usage: profile_step.sh OUT_DIR [flags]}"
shift
cd "$(dirname "$0")/../.."
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv 2>/dev/null || true
exec python3 experiments/bench/profile_step.py --out "$out" "$@"
