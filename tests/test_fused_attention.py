"""The attention kernels against the XLA path and against code we did not write.

`AttentionMask.allowed()` against a hand-written loop; `attend(..., "xla")` against a numpy softmax;
the cuDNN arguments (lengths, flags, window) run through jax's own XLA implementation of the same
arguments; the Splash kernel in Pallas' interpreter against the XLA path (outputs and gradients,
padding + packing + causal + window); a BERT pretraining step with Splash compiled by libtpu for a
real TPU slice; one-line errors where a kernel cannot run (CPU)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.config import preset
from bert_jax.errors import BertJaxError
from bert_jax.model.attention_core import AttentionMask, attend, check_implementation
from bert_jax.model.attention_kernels.cudnn import cudnn_arguments
from bert_jax.model.attention_kernels.splash import splash_attention

HEADS, HEAD_DIM = 2, 64  # BERT's head size
# Right-padded rows: one sequence + padding; three packed sequences + padding; two packed, full.
PACKS = [[1] * 100 + [0] * 28, [1] * 40 + [2] * 50 + [3] * 20 + [0] * 18, [1] * 70 + [2] * 58]
MASKS = [  # (packed, causal, window)
    (False, False, 0), (False, True, 0), (False, True, 16), (False, False, 16),
    (True, False, 0), (True, False, 32), (True, True, 16),
]  # fmt: skip


def make_mask(packs: list[list[int]], packed: bool, causal: bool, window: int) -> AttentionMask:
    pack_BxL = jnp.asarray(packs, jnp.int32)
    return AttentionMask(
        valid_BxL=pack_BxL > 0, pack_BxL=pack_BxL if packed else None, causal=causal, window=window
    )


def qkv(length: int, dtype=jnp.float32, seed: int = 0) -> tuple[jax.Array, ...]:
    keys = jax.random.split(jax.random.PRNGKey(seed), 3)
    shape = (len(PACKS), length, HEADS, HEAD_DIM)
    return tuple(jax.random.normal(k, shape, dtype) for k in keys)


@pytest.mark.parametrize("packed, causal, window", MASKS)
def test_allowed_matches_a_hand_written_loop(packed, causal, window):
    packs = [[1, 1, 1, 2, 2, 2, 2, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1, 0], [1, 2, 2, 2, 3, 3, 3, 3, 3]]
    got = np.asarray(make_mask(packs, packed, causal, window).allowed())
    for b, row in enumerate(packs):
        for i in range(len(row)):
            for j in range(len(row)):
                ok = row[j] > 0 and (not packed or row[i] == row[j])
                ok = ok and (not causal or j <= i) and (not window or abs(i - j) <= window // 2)
                assert got[b, 0, i, j] == ok, (b, i, j)


def naive_attention(q, k, v, allowed_Bx1xLxL) -> np.ndarray:
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    scores = np.einsum("bqhk,bthk->bhqt", q, k) / np.sqrt(q.shape[-1])
    scores = np.where(np.asarray(allowed_Bx1xLxL), scores, -1e30)  # rows seeing nothing: unused
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return np.einsum("bhqt,bthk->bqhk", weights / weights.sum(-1, keepdims=True), v)


def seen_rows(mask: AttentionMask) -> np.ndarray:
    """B x L: queries that may see at least one key (the rows every implementation defines)."""
    return np.asarray(mask.allowed()[:, 0].any(-1))


@pytest.mark.parametrize("packed, causal, window", MASKS)
def test_xla_attend_is_softmax_attention(packed, causal, window):
    mask = make_mask(PACKS, packed, causal, window)
    q, k, v = qkv(128)
    rows = seen_rows(mask)
    got = np.asarray(attend(q, k, v, mask, "xla"))[rows]
    np.testing.assert_allclose(got, naive_attention(q, k, v, mask.allowed())[rows], atol=2e-5)


@pytest.mark.parametrize("packed, causal, window", MASKS)
def test_cudnn_arguments_say_the_same_mask(packed, causal, window):
    """What cuDNN is handed, run through jax's XLA implementation of the same arguments."""
    mask = make_mask(PACKS, packed, causal, window)
    args = cudnn_arguments(mask)
    # Only packing and a two-sided window need the L x L mask; the rest is lengths and flags.
    assert ("mask" in args) == (packed or (window > 0 and not causal))
    q, k, v = qkv(128, seed=1)
    rows = np.asarray(mask.valid_BxL)
    theirs = jax.nn.dot_product_attention(q, k, v, implementation="xla", **args)
    np.testing.assert_allclose(
        np.asarray(theirs)[rows], np.asarray(attend(q, k, v, mask, "xla"))[rows], atol=1e-5
    )


@pytest.mark.parametrize("packed, causal, window", [MASKS[3], MASKS[4], MASKS[5], MASKS[6]])
def test_splash_kernel_matches_xla_with_gradients(packed, causal, window):
    """The real Splash kernel, run by Pallas' interpreter on CPU: padding and packing as segment
    ids, causal and the window as its block mask, q pre-scaled."""
    mask = make_mask(PACKS, packed, causal, window)
    q, k, v = qkv(128, seed=2)
    rows = jnp.asarray(mask.valid_BxL)[:, :, None, None]
    weights = jax.random.normal(jax.random.PRNGKey(3), q.shape)

    def loss(fn, q, k, v):  # real query rows only: padded rows' outputs are never read
        out = fn(q, k, v)
        return jnp.sum(jnp.where(rows, out * weights, 0.0)), out

    splash = jax.jit(lambda q, k, v: splash_attention(q, k, v, mask, interpret=True))
    xla = jax.jit(lambda q, k, v: attend(q, k, v, mask, "xla"))
    grads = [jax.grad(loss, argnums=(1, 2, 3), has_aux=True)(f, q, k, v) for f in (splash, xla)]
    (got_g, got_out), (want_g, want_out) = grads
    assert np.isfinite(np.asarray(got_out)).all()  # padded query rows too
    np.testing.assert_allclose(
        np.asarray(got_out)[np.asarray(mask.valid_BxL)],
        np.asarray(want_out)[np.asarray(mask.valid_BxL)],
        atol=1e-5,
    )
    for name, got, want in zip("qkv", got_g, want_g, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5, err_msg=name)


@pytest.mark.parametrize("implementation, needs", [("cudnn", "GPU"), ("splash", "TPU")])
def test_a_kernel_on_cpu_is_a_one_line_error(implementation, needs):
    mask = make_mask(PACKS, True, False, 0)
    q, k, v = qkv(128, jnp.bfloat16)
    with pytest.raises(BertJaxError, match=f"attention_implementation '{implementation}'") as e:
        jax.jit(lambda q, k, v: attend(q, k, v, mask, implementation))(q, k, v)
    assert needs in str(e.value) and "runs on cpu" in str(e.value) and "\n" not in str(e.value)


def test_auto_is_the_reference_on_cpu_and_allows_attention_dropout():
    """The "auto" kernel runs xla where no kernel applies (this CPU: the same numbers), and,
    unlike a named kernel, leaves attention dropout to the explicit path instead of refusing it."""
    mask = make_mask(PACKS, True, False, 16)
    q, k, v = qkv(128)
    auto, xla = (jax.jit(lambda q, k, v, i=i: attend(q, k, v, mask, i))(q, k, v)
                 for i in ("auto", "xla"))  # fmt: skip
    np.testing.assert_array_equal(np.asarray(auto), np.asarray(xla))
    assert preset("tiny", attention_implementation="auto").attention_probs_dropout_prob == 0.1


def test_bad_kernel_names_and_lengths_are_refused():
    with pytest.raises(BertJaxError, match="attention_implementation 'flash'"):
        check_implementation("flash")
    with pytest.raises(BertJaxError, match="attention_implementation 'flash'"):
        preset("tiny", attention_implementation="flash")
    no_dropout = dict(attention_probs_dropout_prob=0.0)
    assert (
        preset("tiny", attention_implementation="splash", **no_dropout).attention_implementation
        == "splash"
    )
    # The kernels return no probabilities: attention dropout would be silently skipped.
    with pytest.raises(BertJaxError, match="keep no probabilities to drop"):
        preset("tiny", attention_implementation="splash")
    mask = AttentionMask(valid_BxL=jnp.ones((1, 100), bool))
    q = jnp.zeros((1, 100, HEADS, HEAD_DIM))
    with pytest.raises(BertJaxError, match=r"multiple of 128 \(.*got 100"):
        splash_attention(q, q, q, mask, interpret=True)


# ---- compiled by libtpu for real TPU slices (compile-only devices, no TPU) -------------------


@pytest.mark.parametrize("topology", ["v4:2x2x1", "v6e:2x2"])
def test_splash_with_head_size_64_compiles_for_tpu(topology):
    pytest.importorskip("libtpu", reason="libtpu (pip install 'jax[tpu]') is not installable here")
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from bert_jax.aot.topology import resolve_slice

    device = resolve_slice(topology).devices()[0]
    mask = make_mask(PACKS, True, False, 32)
    sharding = NamedSharding(Mesh(np.array([device]), ("x",)), PartitionSpec())
    spec = jax.ShapeDtypeStruct((len(PACKS), 128, HEADS, HEAD_DIM), jnp.bfloat16, sharding=sharding)

    def loss(q, k, v):
        return splash_attention(q, k, v, mask).astype(jnp.float32).sum()

    with jax.sharding.use_abstract_mesh(sharding.mesh.abstract_mesh):
        compiled = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(spec, spec, spec).compile()
    assert len(re.findall(r'custom_call_target="tpu_custom_call"', compiled.as_text())) == 3


@pytest.mark.parametrize("implementation", ["splash", "auto"])
def test_bert_pretraining_step_with_splash_compiles_for_a_tpu_slice(implementation):
    """The real `bert-jax pretrain` step (tiny BERT, 2 layers, head size 64, 128 tokens) with
    attention_implementation="splash" (or "auto", which picks it on TPU), compiled for a v5e 2x2
    slice: the kernel runs inside shard_map on each device's rows (forward, dq and dkv kernels
    per layer)."""
    pytest.importorskip("libtpu", reason="libtpu (pip install 'jax[tpu]') is not installable here")
    from bert_jax.aot.pretraining import compile_pretraining
    from bert_jax.train.config import pretrain_config

    config = pretrain_config("tiny")
    config.update(attention_implementation=implementation, attention_probs_dropout_prob=0.0,
                  max_seq_length=128, global_batch_size=8, vocab_size=512)  # fmt: skip
    report, trainer = compile_pretraining(config, "v5e:2x2")
    assert report.fits and dict(trainer.mesh.shape) == {"data": 1, "fsdp": 4, "tensor": 1}
    calls = re.findall(r'custom_call_target="tpu_custom_call"', report.compiled.as_text())
    assert len(calls) == 3 * 2  # tiny: 2 layers
