"""A TrainState's checksum, one number per top-level field, taken when a checkpoint is saved and
compared when it is restored: a step whose arrays came back different is refused, not resumed."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


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


def _host_sum(x: jax.Array) -> int:
    """`_as_words` in numpy, for arrays whose devices are this host's CPU: the same sum without
    compiling a program over the state's leaf list, which took 0.6-0.8 s of one core for a tiny
    BERT's state (2026-12-02), anew for every model, at each save and restore."""
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    words = np.asarray(x)
    if words.dtype == np.bool_:
        words = words.astype(np.uint8)
    words = np.ascontiguousarray(words).view(f"uint{words.dtype.itemsize * 8}")
    if words.dtype.itemsize > 4:
        words = words.view(np.uint32)  # 64-bit types: as pairs of 32-bit words
    return int(np.sum(words, dtype=np.uint32))


def _on_this_cpu(leaves: list[jax.Array]) -> bool:
    return all(
        x.is_fully_addressable and all(d.platform == "cpu" for d in x.devices()) for x in leaves
    )


def leaf_sums(leaves: list[Any]) -> list[int]:
    """Each leaf's words summed mod 2**32: with numpy where the arrays are in this host's memory,
    else one program on their devices (sharded and multi-host arrays never gather)."""
    leaves = [jnp.asarray(x) for x in leaves]  # Python and numpy leaves as jit would take them
    if _on_this_cpu(leaves):
        return [_host_sum(x) for x in leaves]
    return [int(v) for v in jax.device_get(_leaf_sums(leaves))]


def state_fingerprint(state: Any) -> dict[str, int]:
    """Checksums of a state's bits, one per top-level field (params, opt_state, ...): the sum of
    each leaf's words mod 2**32, then a position-weighted sum over leaves. Any changed bit changes
    it."""
    if dataclasses.is_dataclass(state):
        fields = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    else:
        fields = dict(state)
    out = {}
    for name, tree in fields.items():
        sums = leaf_sums(jax.tree.leaves(tree))
        out[name] = sum((i + 1) * int(v) for i, v in enumerate(sums)) % (1 << 61)
    return out
