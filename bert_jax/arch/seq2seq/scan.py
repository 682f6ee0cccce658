"""Looped (`encoder/layer_{i}`) <-> scanned (`encoder/layers`, leading layer axis) parameter
trees of the encoder-decoder, for both stacks, so any checkpoint loads into either layout."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax.core import meta

STACKS = ("encoder", "decoder")


def stack_seq2seq(params: dict) -> dict:
    """`layer_0..layer_{N-1}` -> `layers` (no-op where already scanned)."""
    out: dict[str, Any] = dict(meta.unbox(params))
    for name in STACKS:
        tree = out.get(name)
        if not isinstance(tree, dict) or "layer_0" not in tree:
            continue
        n = sum(1 for k in tree if k.startswith("layer_"))
        layers = [tree[f"layer_{i}"] for i in range(n)]
        rest = {k: v for k, v in tree.items() if not k.startswith("layer_")}
        out[name] = {**rest, "layers": jax.tree.map(lambda *xs: jnp.stack(xs), *layers)}
    return out


def unstack_seq2seq(params: dict) -> dict:
    """`layers` -> `layer_0..layer_{N-1}` (no-op where already looped)."""
    out: dict[str, Any] = dict(meta.unbox(params))
    for name in STACKS:
        tree = out.get(name)
        if not isinstance(tree, dict) or "layers" not in tree:
            continue
        n = jax.tree.leaves(tree["layers"])[0].shape[0]
        rest = {k: v for k, v in tree.items() if k != "layers"}
        looped = {f"layer_{i}": jax.tree.map(lambda x, i=i: x[i], tree["layers"]) for i in range(n)}
        out[name] = {**rest, **looped}
    return out
