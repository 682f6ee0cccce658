"""Post-LayerNorm Transformer layers and the encoder stack (optionally scanned, rematerialised and
with parameters shared across layers).

The encoder turns the padding mask (and, for packed rows, `pack_BxL`: which sequence each token
belongs to) into one `AttentionMask` that every layer reads. A layer has the scan signature
`(carry, mask, shared) -> (carry, per_layer_outputs)` so that the
same module runs in a Python loop (`layer_0`, `layer_1`, ...) or under `nn.scan` (one `layers`
entry whose parameters have a leading `layers` axis); `bert_jax.model.scan` converts between them.

Cross-layer sharing (ALBERT, `config.share_layers`): the shared half of a layer (or the whole
layer) has one set of weights, `encoder/shared`, in both layouts. It cannot be a submodule of the
layer: `nn.scan` gives every scope a layer touches the same leading `layers` axis, so the encoder
holds the shared weights as one parameter tree and each layer applies `SharedBlock` to it.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.config import BertConfig
from bert_jax.model.attention import SelfAttention
from bert_jax.model.attention_core import AttentionMask
from bert_jax.model.layers import (
    Dropout,
    compute_dtype,
    constrain_batch,
    dense,
    gelu,
    layer_norm,
)

REMAT_POLICIES = {
    "full": None,
    "dots": jax.checkpoint_policies.checkpoint_dots,
    "dots_no_batch": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}
# The halves of a layer that `share_layers` puts into `encoder/shared`.
SHARED_HALVES = {"none": (), "all": ("attention", "ffn"), "attention": ("attention",),
                 "ffn": ("ffn",)}  # fmt: skip


# The two halves create their modules in the calling module's scope, so an unshared layer keeps
# the parameter names `attention`, `attention_layer_norm`, `intermediate`, `output`,
# `output_layer_norm`, and a shared half has the same names under `encoder/shared`.
def attention_half(
    cfg: BertConfig,
    x_BxLxD: jax.Array,
    mask: AttentionMask,
    drop: Dropout,
    deterministic: bool,
    output_attentions: bool,
) -> tuple[jax.Array, jax.Array | None]:
    attn_BxLxD, probs_BxHxLxL = SelfAttention(
        cfg, deterministic, output_attentions, name="attention"
    )(x_BxLxD, mask)
    return layer_norm(cfg, "attention_layer_norm")(x_BxLxD + drop(attn_BxLxD)), probs_BxHxLxL


def ffn_half(cfg: BertConfig, x_BxLxD: jax.Array, drop: Dropout) -> jax.Array:
    h_BxLxF = dense(cfg, cfg.intermediate_size, ("embed", "mlp"), "intermediate")(x_BxLxD)
    h_BxLxF = gelu(cfg)(h_BxLxF)
    h_BxLxD = dense(cfg, cfg.hidden_size, ("mlp", "embed"), "output")(h_BxLxF)
    return constrain_batch(layer_norm(cfg, "output_layer_norm")(x_BxLxD + drop(h_BxLxD)))


class SharedBlock(nn.Module):
    """The halves named by `config.share_layers`, as one unit with its own parameter tree."""

    config: BertConfig
    deterministic: bool = True
    output_attentions: bool = False

    @nn.compact
    def __call__(self, x_BxLxD: jax.Array, mask: AttentionMask, half: str):
        drop = Dropout(self.config.hidden_dropout_prob, deterministic=self.deterministic)
        if half == "attention":
            return attention_half(
                self.config, x_BxLxD, mask, drop, self.deterministic, self.output_attentions
            )
        return ffn_half(self.config, x_BxLxD, drop)

    def init_params(self, rng: jax.Array) -> dict:
        """Parameters of every shared half (boxed with their logical axes)."""
        x_1x1xD = jnp.zeros((1, 1, self.config.hidden_size), compute_dtype(self.config))
        mask = AttentionMask(valid_BxL=jnp.ones((1, 1), bool))

        def every_half(module: SharedBlock) -> None:
            for half in SHARED_HALVES[module.config.share_layers]:
                module(x_1x1xD, mask, half)

        return nn.init(every_half, self)(rng)["params"]


class TransformerLayer(nn.Module):
    config: BertConfig
    deterministic: bool = True
    output_hidden_states: bool = False
    output_attentions: bool = False

    @nn.compact
    def __call__(self, x_BxLxD: jax.Array, mask: AttentionMask, shared: dict | None = None):
        cfg = self.config
        drop = Dropout(cfg.hidden_dropout_prob, deterministic=self.deterministic)
        shared_halves = SHARED_HALVES[cfg.share_layers]
        if "attention" in shared_halves:
            x_BxLxD, probs_BxHxLxL = self._apply_shared(shared, x_BxLxD, mask, "attention")
        else:
            x_BxLxD, probs_BxHxLxL = attention_half(
                cfg, x_BxLxD, mask, drop, self.deterministic, self.output_attentions
            )
        if "ffn" in shared_halves:
            x_BxLxD = self._apply_shared(shared, x_BxLxD, mask, "ffn")
        else:
            x_BxLxD = ffn_half(cfg, x_BxLxD, drop)
        hidden = x_BxLxD if self.output_hidden_states else None
        return x_BxLxD, (hidden, probs_BxHxLxL if self.output_attentions else None)

    def _apply_shared(self, shared: dict, x_BxLxD: jax.Array, mask: AttentionMask, half: str):
        # A fresh dropout key per layer (and per half): shared weights, independent dropout.
        rngs = {} if self.deterministic else {"dropout": self.make_rng("dropout")}
        block = SharedBlock(self.config, self.deterministic, self.output_attentions, parent=None)
        return block.apply({"params": shared}, x_BxLxD, mask, half, rngs=rngs)


class Encoder(nn.Module):
    config: BertConfig

    @nn.compact
    def __call__(
        self,
        x_BxLxD: jax.Array,
        mask_BxL: jax.Array,
        deterministic: bool,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        pack_BxL: jax.Array | None = None,
    ) -> tuple[jax.Array, list[jax.Array], list[jax.Array]]:
        """`mask_BxL`: the real tokens; `pack_BxL`: packed-sequence ids (1, 2, ...; 0 on padding),
        None for one sequence per row."""
        cfg = self.config
        mask = AttentionMask(valid_BxL=mask_BxL.astype(bool), pack_BxL=pack_BxL, causal=cfg.causal)
        shared = None
        if cfg.share_layers != "none":
            shared = self.param("shared", SharedBlock(cfg, parent=None).init_params)
        layer_cls = TransformerLayer
        if cfg.remat_policy != "none":
            layer_cls = nn.remat(
                layer_cls, policy=REMAT_POLICIES[cfg.remat_policy], prevent_cse=not cfg.scan_layers
            )
        flags = dict(
            deterministic=deterministic,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        if cfg.scan_layers:
            stack = nn.scan(
                layer_cls,
                variable_axes={"params": 0},
                split_rngs={"params": True, "dropout": True},
                in_axes=(nn.broadcast, nn.broadcast),
                length=cfg.num_hidden_layers,
                metadata_params={nn.PARTITION_NAME: "layers"},
            )(cfg, **flags, name="layers")
            x_BxLxD, (hidden_NxBxLxD, probs_NxBxHxLxL) = stack(x_BxLxD, mask, shared)
            hidden = list(hidden_NxBxLxD) if output_hidden_states else []
            probs = list(probs_NxBxHxLxL) if output_attentions else []
            return x_BxLxD, hidden, probs
        hidden, probs = [], []
        for i in range(cfg.num_hidden_layers):
            x_BxLxD, (h, p) = layer_cls(cfg, **flags, name=f"layer_{i}")(x_BxLxD, mask, shared)
            if output_hidden_states:
                hidden.append(h)
            if output_attentions:
                probs.append(p)
        return x_BxLxD, hidden, probs
