"""bert_jax.model.layers.Dropout against flax's nn.Dropout: the same module names, masks, outputs
and gradients under threefry and under XLA's generator (whose mask it stores as one byte per
element for the backward pass: the bytes are measured by experiments/bench/roofline_table.py)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.model.layers import Dropout


class _TwoDropouts(nn.Module):
    make: type

    @nn.compact
    def __call__(self, x):
        drop = self.make(0.1, deterministic=False)
        return self.make(0.3)(drop(x) * 2.0 + drop(x), deterministic=False)  # one used twice


def _key(impl: str) -> jax.Array:
    if impl == "threefry":
        return jax.random.PRNGKey(3)  # raw uint32[2], as the trainer passes it
    return jax.random.wrap_key_data(jnp.arange(4, dtype=jnp.uint32), impl=impl)


@pytest.mark.parametrize("impl", ["threefry", "unsafe_rbg", "rbg"])
def test_dropout_matches_flax_in_values_gradients_and_names(impl):
    x = jax.random.normal(jax.random.PRNGKey(0), (4, 16, 32), jnp.float32)

    def run(make):
        module = _TwoDropouts(make)

        def loss(x):
            y, _ = module.apply({}, x, rngs={"dropout": _key(impl)}, mutable=True)
            return jnp.sum(y * jnp.cos(y)), y

        (_, y), g = jax.jit(jax.value_and_grad(loss, has_aux=True))(x)
        return np.asarray(y), np.asarray(g), str(jax.make_jaxpr(loss)(x))

    y_ours, g_ours, program = run(Dropout)
    y_flax, g_flax, _ = run(nn.Dropout)
    # the mask is pinned (stored, not derived again from the bits) only under XLA's generator
    assert ("optimization_barrier" in program) == (impl != "threefry")
    # a module's key folds in its path (Dropout_0, Dropout_1): equal masks mean equal names
    np.testing.assert_array_equal(y_ours, y_flax)
    np.testing.assert_array_equal(g_ours, g_flax)
    dropped = np.mean(y_ours == 0)
    assert 0.2 < dropped < 0.5  # masks were drawn: 0.3 + 0.7 * 0.1 * 0.1 = 0.307 expected
