"""Convert parameter trees between the looped layout (`encoder/layer_{i}`) and the scanned one
(`encoder/layers` with a leading layer axis), so any checkpoint loads into either model. Weights
shared across layers (`encoder/shared`) are the same in both layouts and pass through."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax.core import meta


def _find_encoders(tree: Any, path=()):
    if isinstance(tree, dict):
        if "encoder" in tree and isinstance(tree["encoder"], dict):
            yield path + ("encoder",), tree["encoder"]
        for k, v in tree.items():
            if k != "encoder":
                yield from _find_encoders(v, path + (k,))


def _replace(tree: dict, path: tuple, value: Any) -> dict:
    if not path:
        return value
    out = dict(tree)
    out[path[0]] = _replace(tree[path[0]], path[1:], value)
    return out


def stack_layers(params: dict) -> dict:
    """`layer_0..layer_{N-1}` -> `layers` with leading axis N (no-op if already scanned)."""
    params = meta.unbox(params)
    for path, enc in list(_find_encoders(params)):
        if "layer_0" not in enc:
            continue
        n = sum(1 for k in enc if k.startswith("layer_"))
        stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *[enc[f"layer_{i}"] for i in range(n)])
        rest = {k: v for k, v in enc.items() if not k.startswith("layer_")}
        params = _replace(params, path, {**rest, "layers": stacked})
    return params


def unstack_layers(params: dict) -> dict:
    """`layers` with leading axis N -> `layer_0..layer_{N-1}` (no-op if already looped)."""
    params = meta.unbox(params)
    for path, enc in list(_find_encoders(params)):
        if "layers" not in enc:
            continue
        n = jax.tree.leaves(enc["layers"])[0].shape[0]
        looped = {f"layer_{i}": jax.tree.map(lambda x, i=i: x[i], enc["layers"]) for i in range(n)}
        rest = {k: v for k, v in enc.items() if k != "layers"}
        params = _replace(params, path, {**rest, **looped})
    return params
