"""A TrainState's checksum, one number per top-level field, taken when a checkpoint is saved and
compared when it is restored: a step whose arrays came back different is refused, not resumed."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp


def _as_words(x: jax.Array) -> jax.Array:
    """The array's bits as unsigned integers (every dtype of a TrainState), summed mod 2**32."""
    x = jnp.asarray(x)
    if x.dtype == jnp.bool_:
        x = x.astype(jnp.uint8)
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    unsigned = jnp.dtype(f"uint{x.dtype.itemsize * 8}")
    words = jax.lax.bitcast_convert_type(x, unsigned)
    if unsigned.itemsize > 4:  # 64-bit types: as pairs of 32-bit words
        words = jax.lax.bitcast_convert_type(words, jnp.uint32)
    return jnp.sum(words.astype(jnp.uint32), dtype=jnp.uint32)


@jax.jit
def _leaf_sums(leaves: list[jax.Array]) -> list[jax.Array]:
    return [_as_words(x) for x in leaves]


def state_fingerprint(state: Any) -> dict[str, int]:
    """Checksums of a state's bits, one per top-level field (params, opt_state, ...): the sum of
    each leaf's words mod 2**32, then a position-weighted sum over leaves. Any changed bit changes
    it. Computed on the devices (a reduction, so sharded and multi-host arrays never gather)."""
    if dataclasses.is_dataclass(state):
        fields = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    else:
        fields = dict(state)
    out = {}
    for name, tree in fields.items():
        sums = jax.device_get(_leaf_sums(jax.tree.leaves(tree)))
        out[name] = sum((i + 1) * int(v) for i, v in enumerate(sums)) % (1 << 61)
    return out
