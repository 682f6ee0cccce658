"""XLA's own accounting of the train step (`bert-jax compile`'s roofline and `--hlo_census`),
read from what XLA printed: its cost analysis, its memory analysis and its optimized HLO text.

The values are XLA's; the tests check that what the command prints is present and consistent
(the bound recomputed from the printed FLOPs and bytes, the minimum's state part against XLA's
own argument bytes, the census's bytes against the shapes of a program whose sizes we know)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.aot.hlo_census import hlo_census, type_bytes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_census_counts_a_known_program_by_its_shapes():
    """x @ w, a softmax and a dropout-style mask on CPU: the matrix product's bytes are its
    operands' and output's, the random bits are found by the JAX operation that made them."""
    x, w = jnp.ones((64, 32), jnp.float32), jnp.ones((32, 16), jnp.float32)

    def step(x, w, key):
        y = jax.nn.softmax(x @ w)
        keep = jax.random.bernoulli(key, 0.9, y.shape)
        return jnp.where(keep, y, 0.0).sum()

    text = jax.jit(step).lower(x, w, jax.random.PRNGKey(0)).compile().as_text()
    census = hlo_census(text)
    kinds = {c for c, *_ in census.by_category()}
    assert "matrix products" in kinds and "random bits (threefry hash)" in kinds, kinds
    matmul = [i for i in census.instructions if i.category == "matrix products"]
    assert min(i.bytes for i in matmul) >= (64 * 32 + 32 * 16) * 4  # its two operands at least
    assert sum(r[2] for r in census.by_category()) == pytest.approx(census.total_bytes)
    assert type_bytes("(bf16[64,128]{1,0}, u32[2]{0}, s32[])") == 64 * 128 * 2 + 8 + 4
    # CPU has one memory; a TPU layout's S(n), n > 0, is on-chip and not HBM traffic
    assert census.total_hbm_bytes == census.total_bytes
    tpu_pair = "(f32[8,128]{1,0:T(8,128)S(3)}, f32[8,128]{1,0:T(8,128)}, u32[]{:S(2)})"
    assert type_bytes(tpu_pair, hbm_only=True) == 8 * 128 * 4


_NUM = r"([0-9.]+(?:e[+-]?\d+)?)"


@pytest.mark.slow  # one TPU compile of the tiny preset in a fresh process (~40 s)
def test_compile_prints_a_consistent_roofline_and_census():
    env = dict(os.environ, ALLOW_MULTIPLE_LIBTPU_LOAD="1")
    proc = subprocess.run(
        [sys.executable, "-m", "bert_jax.cli", "compile", "--config", "pretrain.py:tiny",
         "--topology", "v4-8", "--config.global_batch_size=32", "--hlo_census=3"],
        capture_output=True, text=True, env=env, timeout=900, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    peak, bw = map(float, re.search(rf"peak {_NUM} TFLOP/s, HBM {_NUM} GB/s", out).groups())
    flops, bytes_ = map(float, re.search(rf"XLA FLOPs {_NUM} .*XLA bytes {_NUM}", out).groups())
    model = float(re.search(rf"model FLOPs {_NUM}: MFU bound", out).group(1))
    bound = float(re.search(rf"MFU bound {_NUM}%", out).group(1))
    compute_s = max(flops, model) / (peak * 1e12)  # at least the model's FLOPs
    expected = model / (peak * 1e12) / max(compute_s, bytes_ / (bw * 1e9))
    assert bound == pytest.approx(100 * expected, rel=0.004, abs=0.06)  # 0.1%, from 3 digits
    low = float(re.search(rf"analytic minimum bytes {_NUM}", out).group(1))
    parts = re.search(r"analytic minimum bytes \S+ \((.*)\)", out).group(1)
    values = [float(v) for v in re.findall(rf" {_NUM}(?:,|$)", parts)]
    assert len(values) == 4 and sum(values) == pytest.approx(low, rel=2e-3)
    ratio = float(re.search(rf"XLA's bytes / minimum: {_NUM}x", out).group(1))
    assert ratio == pytest.approx(bytes_ / low, rel=0.01)
    assert ratio > 1.0  # XLA cannot beat the minimum
    # The update reads and writes the state XLA itself passes in: 3 x params + 2 x moments per
    # device, where XLA's argument bytes are params + moments (+ the step and the batch).
    update = float(re.search(rf"optimizer update {_NUM}", out).group(1))
    grads = float(re.search(rf"gradients written {_NUM}", out).group(1))
    state = update - grads  # 2 x (params + moments)
    arguments = float(re.search(r"arguments\s+([0-9.]+) GiB", out).group(1)) * 1024**3
    assert state / 2 == pytest.approx(arguments, abs=0.006 * 1024**3)  # printed to 0.01 GiB
    # The HBM-only bound: the same roofline with the HBM bytes, which are part of the census's
    hbm, hbm_bound = map(float, re.search(rf"HBM bytes {_NUM} .*MFU bound {_NUM}%", out).groups())
    expected = model / (peak * 1e12) / max(compute_s, hbm / (bw * 1e9))
    assert hbm_bound == pytest.approx(100 * expected, rel=0.004, abs=0.06)  # from 3 digits
    hbm_ratio = float(re.search(rf"HBM bytes / minimum: {_NUM}x", out).group(1))
    assert hbm_ratio == pytest.approx(hbm / low, abs=0.006)  # printed to 0.01; the tiny
    # model's step fits in a v4's on-chip memory, so its HBM bytes fall below the minimum
    census = out[out.index("HLO census") :]
    total, in_hbm = map(float, re.search(rf"{_NUM} GB of operands \+ outputs, {_NUM} GB of them "
                                         "in HBM", census).groups())  # fmt: skip
    assert 0 < in_hbm < total and in_hbm == pytest.approx(hbm / 1e9, rel=0.01)
    table = census.split("largest")[0]
    shares = [float(s) for s in re.findall(r" ([0-9.]+)%", table)]
    bytes_column = shares[0::2]  # each printed to 0.1%
    assert sum(bytes_column) == pytest.approx(100, abs=0.05 * len(bytes_column) + 0.01)
    hbm_column = [float(r.split("%")[1].split()[0]) for r in table.splitlines()[2:] if "%" in r]
    assert sum(hbm_column) == pytest.approx(in_hbm, abs=0.002 * len(hbm_column) + 0.01)
    assert "matrix products" in census and len(census.split("largest 3")[1].splitlines()) >= 4
    # dropout_prng=auto draws the masks with XLA's generator on TPU (the hash was a sixth of the
    # compiler's estimated cycles): the bulk bits are no threefry fusions.
    assert "random bits (XLA's generator)" in census
    assert np.isfinite([peak, bw, flops, bytes_, model]).all()


_DROPOUT_BITS = """
import re, sys
import bert_jax  # sets the libtpu flag before JAX meets the TPU
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from bert_jax.aot.topology import resolve_slice

mesh = Mesh(np.array(resolve_slice("v4-8").devices()), ("data",))
rows = NamedSharding(mesh, P("data"))

def dropout(x, key_data):
    keep = jax.random.bernoulli(jax.random.wrap_key_data(key_data, impl="unsafe_rbg"), 0.9, x.shape)
    return jnp.where(keep, x / 0.9, 0)

x = jax.ShapeDtypeStruct((32, 4, 128), jnp.bfloat16, sharding=rows)
key = jax.ShapeDtypeStruct((4,), jnp.uint32, sharding=NamedSharding(mesh, P()))
text = jax.jit(dropout, out_shardings=rows).lower(x, key).compile().as_text()
print(re.findall(r"u32\\[(\\d+),4,128\\][^ ]* rng-bit-generator", text))
"""


@pytest.mark.parametrize("flag", ["", "--xla_tpu_spmd_rng_bit_generator_unsafe=false"])
def test_tpu_dropout_bits_are_drawn_per_device(flag):
    """Dropout masks from XLA's generator (unsafe_rbg, the TPU default) on a batch-sharded v4-8
    step: each of the 4 devices draws its own 8 rows of bits, not the global batch's 32 (what
    libtpu does without the flag bert_jax sets; a user's own value for it is kept)."""
    env = dict(os.environ, ALLOW_MULTIPLE_LIBTPU_LOAD="1", LIBTPU_INIT_ARGS=flag)
    proc = subprocess.run([sys.executable, "-c", _DROPOUT_BITS], capture_output=True, text=True,
                          env=env, timeout=600, cwd=REPO)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == ("['8']" if not flag else "['32']"), proc.stdout
