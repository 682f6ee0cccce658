"""The same weights give the same numbers (and gradients) whatever the execution layout: looped or
scanned layers, with or without rematerialisation; dropout is explicit and seeded."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax.core import meta

from bert_jax.arch.bert.heads import BertForPreTraining
from bert_jax.config import BertConfig
from bert_jax.model.scan import stack_layers, unstack_layers

CONFIG = BertConfig(
    vocab_size=120, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
    intermediate_size=48, max_position_embeddings=16,
)  # fmt: skip
IDS = np.arange(2 * 12).reshape(2, 12) % 120
MASK = (np.arange(12)[None] < np.array([[12], [7]])).astype(np.int32)
POSITIONS = np.array([[1, 3], [2, 5]])


@pytest.fixture(scope="module")
def params():
    rng = np.random.RandomState(0)
    abstract = jax.eval_shape(BertForPreTraining(CONFIG).init, jax.random.key(0), IDS, MASK)
    return jax.tree.map(
        lambda x: rng.normal(0, 0.2, x.shape).astype(np.float32), meta.unbox(abstract)
    )["params"]


def loss_fn(config, deterministic=True):
    model = BertForPreTraining(config)

    def loss(p, dropout_key):
        out = model.apply(
            {"params": p}, IDS, MASK, None, POSITIONS, deterministic=deterministic,
            rngs={"dropout": dropout_key},
        )  # fmt: skip
        return jnp.sum(out.mlm_logits**2) * 1e-3 + jnp.sum(out.nsp_logits)

    return loss


def loss_and_grads(config, params):
    return jax.jit(jax.value_and_grad(loss_fn(config)))(params, jax.random.key(0))


@pytest.fixture(scope="module")
def reference(params):
    return loss_and_grads(CONFIG, params)


@pytest.mark.parametrize("scan_layers, remat", [(False, "full"), (True, "dots")])
def test_layouts_agree(params, reference, scan_layers, remat):
    ref_loss, ref_grads = reference
    config = CONFIG.replace(scan_layers=scan_layers, remat_policy=remat)
    p = stack_layers(params) if scan_layers else params
    value, grads = loss_and_grads(config, p)
    np.testing.assert_allclose(value, ref_loss, rtol=1e-5)
    grads = unstack_layers(grads)
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_stack_unstack_round_trip(params):
    stacked = stack_layers(params)
    layers = stacked["bert"]["encoder"]["layers"]
    assert layers["attention"]["query"]["kernel"].shape == (3, 32, 4, 8)
    back = unstack_layers(stacked)
    assert jax.tree.structure(back) == jax.tree.structure(params)
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(params), strict=True):
        np.testing.assert_array_equal(a, b)


def test_dropout_is_seeded_and_active(params):
    train = jax.jit(loss_fn(CONFIG, deterministic=False))
    a, b, c = (float(train(params, jax.random.key(seed))) for seed in (1, 1, 2))
    d = float(jax.jit(loss_fn(CONFIG))(params, jax.random.key(1)))
    assert a == b and a != c and a != d


def test_sequence_longer_than_positions_is_refused(params):
    with pytest.raises(ValueError, match="max_position_embeddings"):
        BertForPreTraining(CONFIG).apply({"params": params}, np.zeros((1, 17), np.int32))
