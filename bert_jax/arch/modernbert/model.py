"""The ModernBERT encoder: token embeddings -> LayerNorm -> pre-norm layers (rotary attention,
global or sliding-window; GeGLU feed-forward), no biases -> final LayerNorm.

Parameter names follow transformers' modules (`embeddings/tok_embeddings`, `layer_0/attn/Wqkv`,
`layer_1/mlp/Wi`, `final_norm`), so conversion is a rename and a transpose. Layer 0 has no
attention norm (the embedding norm precedes it); with `scan_layers` layers 1..N-1 are one
`layers` entry with a leading layer axis, and each layer's kind (global or local) is a scanned
input. Packed rows (`pack_BxL`) restart positions per sequence and keep attention inside it.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.arch.bert.model import BertOutput
from bert_jax.arch.modernbert.config import ACTIVATIONS, ModernBertConfig
from bert_jax.model.attention_core import AttentionMask, attend, attention_scores
from bert_jax.model.attention_kernels.platform import target_platform
from bert_jax.model.encoder import REMAT_POLICIES
from bert_jax.model.layers import Embed, constrain_batch
from bert_jax.model.packing import pack_positions


def _init(cfg: ModernBertConfig, axes: tuple[str | None, ...]):
    return nn.with_logical_partitioning(
        jax.nn.initializers.truncated_normal(cfg.initializer_range), axes
    )


def _zeros(axes: tuple[str | None, ...]):
    return nn.with_logical_partitioning(nn.initializers.zeros_init(), axes)


def norm(cfg: ModernBertConfig, name: str) -> nn.LayerNorm:
    return nn.LayerNorm(
        epsilon=cfg.norm_eps,
        use_bias=cfg.norm_bias,
        dtype=jnp.dtype(cfg.dtype),
        param_dtype=jnp.float32,
        scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
        bias_init=_zeros(("embed",)),
        name=name,
    )


def dense(cfg: ModernBertConfig, features, axes, use_bias: bool, name: str, in_axes=-1):
    return nn.DenseGeneral(
        features,
        axis=in_axes,
        use_bias=use_bias,
        dtype=jnp.dtype(cfg.dtype),
        param_dtype=jnp.float32,
        kernel_init=_init(cfg, axes),
        bias_init=_zeros(axes[-(len(features) if isinstance(features, tuple) else 1) :]),
        name=name,
    )


def activation(name: str):
    return functools.partial(jax.nn.gelu, approximate=ACTIVATIONS[name])


def rotary(positions_BxL: jax.Array, head_dim: int, theta: float) -> tuple[jax.Array, jax.Array]:
    """cos and signed sin (B x L x 1 x K, float32) of the rotary angles: cos repeated over both
    halves of the head, sin negated on the first half (rotate_half's sign lives in the table)."""
    inv_freq_K2 = 1.0 / theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim)
    angles_BxLxK2 = positions_BxL[..., None].astype(jnp.float32) * inv_freq_K2
    cos_BxLxK2, sin_BxLxK2 = jnp.cos(angles_BxLxK2), jnp.sin(angles_BxLxK2)
    cos_BxLxK = jnp.concatenate([cos_BxLxK2, cos_BxLxK2], axis=-1)
    sin_BxLxK = jnp.concatenate([-sin_BxLxK2, sin_BxLxK2], axis=-1)
    return cos_BxLxK[:, :, None, :], sin_BxLxK[:, :, None, :]


def rotate(
    x_BxLxHxK: jax.Array, cos: jax.Array, signed_sin: jax.Array, by_matmul: bool | None = None
) -> jax.Array:
    """x cos + rotate_half(x) sin in float32, cast back to x's dtype (rotate_half's sign is in
    the sin table). `by_matmul` (default: on TPU) swaps the halves by a K x K permutation matrix
    on the MXU: a TPU slices half a lane row by writing each half to HBM, and on a four-layer
    ModernBERT-base v4-8 compile the matmul estimated 23% fewer cycles for 1% more FLOPs.
    Elsewhere they are swapped in float32 (on CPU, swapping bfloat16 halves took 1.5x as long).
    Both give the same values, up to rounding."""
    half = x_BxLxHxK.shape[-1] // 2
    if by_matmul is None:
        by_matmul = target_platform() == "tpu"
    x = x_BxLxHxK.astype(jnp.float32)
    if by_matmul:
        swap_KxK = jnp.roll(jnp.eye(2 * half, dtype=x_BxLxHxK.dtype), half, axis=0)
        # HIGHEST: float32 operands would otherwise be rounded to bfloat16 on a TPU's MXU
        swapped = jnp.einsum(
            "blhk,kj->blhj", x_BxLxHxK, swap_KxK, precision=jax.lax.Precision.HIGHEST,
            preferred_element_type=jnp.float32,
        )  # fmt: skip
    else:
        swapped = jnp.concatenate([x[..., half:], x[..., :half]], axis=-1)
    return (x * cos + swapped * signed_sin).astype(x_BxLxHxK.dtype)


class Attention(nn.Module):
    config: ModernBertConfig
    deterministic: bool = True

    @nn.compact
    def __call__(self, x_BxLxD, masks, ropes, is_global) -> jax.Array:
        cfg = self.config
        heads, head_dim = cfg.num_attention_heads, cfg.head_dim
        qkv_BxLx3xHxK = dense(
            cfg, (3, heads, head_dim), ("embed", None, "heads", "kv"), cfg.attention_bias, "Wqkv"
        )(x_BxLxD)
        q, k, v = (qkv_BxLx3xHxK[:, :, i] for i in range(3))
        dropout = not self.deterministic and cfg.attention_dropout > 0
        rng = self.make_rng("dropout") if dropout else None

        def core(kind: int) -> jax.Array:
            cos, sin = ropes[kind]
            q_r, k_r = rotate(q, cos, sin), rotate(k, cos, sin)
            if not dropout:
                return attend(q_r, k_r, v, masks[kind], cfg.attention_implementation)
            probs = jax.nn.softmax(attention_scores(q_r, k_r, masks[kind]), axis=-1)
            keep = jax.random.bernoulli(rng, 1.0 - cfg.attention_dropout, probs.shape)
            probs = jnp.where(keep, probs / (1.0 - cfg.attention_dropout), 0.0)
            return jnp.einsum("bhqt,bthk->bqhk", probs.astype(v.dtype), v)

        if isinstance(is_global, bool):  # a static layer kind (unscanned layers)
            ctx_BxLxHxK = core(0 if is_global else 1)
        else:  # a scanned layer: its kind is data
            ctx_BxLxHxK = jax.lax.cond(is_global, lambda: core(0), lambda: core(1))
        out_BxLxD = dense(
            cfg, cfg.hidden_size, ("heads", "kv", "embed"), cfg.attention_bias, "Wo", (-2, -1)
        )(ctx_BxLxHxK)
        return nn.Dropout(cfg.attention_dropout)(out_BxLxD, deterministic=self.deterministic)


class MLP(nn.Module):
    config: ModernBertConfig
    deterministic: bool = True

    @nn.compact
    def __call__(self, x_BxLxD: jax.Array) -> jax.Array:
        cfg = self.config
        h_BxLx2F = dense(cfg, 2 * cfg.intermediate_size, ("embed", "mlp"), cfg.mlp_bias, "Wi")(
            x_BxLxD
        )
        input_BxLxF, gate_BxLxF = jnp.split(h_BxLx2F, 2, axis=-1)
        h_BxLxF = activation(cfg.hidden_activation)(input_BxLxF) * gate_BxLxF
        h_BxLxF = nn.Dropout(cfg.mlp_dropout)(h_BxLxF, deterministic=self.deterministic)
        return dense(cfg, cfg.hidden_size, ("mlp", "embed"), cfg.mlp_bias, "Wo")(h_BxLxF)


class Layer(nn.Module):
    """One pre-norm layer, scan signature (x, (masks, ropes, is_global)) -> (x, x)."""

    config: ModernBertConfig
    deterministic: bool = True
    first: bool = False  # layer 0: no attention norm
    keep_states: bool = False  # return the layer's output (hidden states) beside the carry

    @nn.compact
    def __call__(self, x_BxLxD, shared, is_global):
        masks, ropes = shared
        h_BxLxD = x_BxLxD if self.first else norm(self.config, "attn_norm")(x_BxLxD)
        x_BxLxD = x_BxLxD + Attention(self.config, self.deterministic, name="attn")(
            h_BxLxD, masks, ropes, is_global
        )
        h_BxLxD = norm(self.config, "mlp_norm")(x_BxLxD)
        x_BxLxD = x_BxLxD + MLP(self.config, self.deterministic, name="mlp")(h_BxLxD)
        x_BxLxD = constrain_batch(x_BxLxD)
        return x_BxLxD, (x_BxLxD if self.keep_states else None)


class Embeddings(nn.Module):
    config: ModernBertConfig

    @nn.compact
    def __call__(self, input_ids_BxL: jax.Array, deterministic: bool) -> jax.Array:
        cfg = self.config
        x_BxLxD = Embed(
            cfg.vocab_size,
            cfg.hidden_size,
            dtype=jnp.dtype(cfg.dtype),
            param_dtype=jnp.float32,
            embedding_init=_init(cfg, ("vocab", "embed")),
            name="tok_embeddings",
        )(input_ids_BxL)
        x_BxLxD = norm(cfg, "norm")(x_BxLxD)
        return nn.Dropout(cfg.embedding_dropout)(x_BxLxD, deterministic=deterministic)


def _layer_class(cfg: ModernBertConfig, static_kind: bool) -> type[Layer]:
    """`Layer`, rematerialised as `remat_policy` says; `static_kind`: the layer's kind (global or
    local) is a Python bool (looped layers), not a scanned input."""
    if cfg.remat_policy == "none":
        return Layer
    return nn.remat(
        Layer, policy=REMAT_POLICIES[cfg.remat_policy], static_argnums=(3,) if static_kind else (),
        prevent_cse=not cfg.scan_layers,
    )  # fmt: skip


class ModernBertModel(nn.Module):
    config: ModernBertConfig

    @nn.compact
    def __call__(
        self,
        input_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array | None = None,
        pack_BxL: jax.Array | None = None,
        *,
        deterministic: bool = True,
        output_hidden_states: bool = False,
    ) -> BertOutput:
        cfg = self.config
        if input_mask_BxL is None:
            input_mask_BxL = jnp.ones_like(input_ids_BxL)
        valid_BxL = input_mask_BxL.astype(bool)
        if pack_BxL is None:
            positions_BxL = jnp.broadcast_to(jnp.arange(input_ids_BxL.shape[-1]), valid_BxL.shape)
        else:
            positions_BxL = pack_positions(pack_BxL)
        whole = AttentionMask(valid_BxL=valid_BxL, pack_BxL=pack_BxL)
        masks = (whole, whole.with_window(cfg.local_attention))
        ropes = (
            rotary(positions_BxL, cfg.head_dim, cfg.global_rope_theta),
            rotary(positions_BxL, cfg.head_dim, cfg.local_rope_theta),
        )
        x_BxLxD = constrain_batch(Embeddings(cfg, name="embeddings")(input_ids_BxL, deterministic))
        hidden = [x_BxLxD]
        layer_cls = _layer_class(cfg, static_kind=True)
        x_BxLxD, _ = layer_cls(cfg, deterministic, True, name="layer_0")(
            x_BxLxD, (masks, ropes), True
        )
        hidden.append(x_BxLxD)
        rest = cfg.num_hidden_layers - 1
        if cfg.scan_layers and rest:
            stack = nn.scan(
                _layer_class(cfg, static_kind=False),
                variable_axes={"params": 0},
                split_rngs={"params": True, "dropout": True},
                in_axes=(nn.broadcast, 0),
                length=rest,
                metadata_params={nn.PARTITION_NAME: "layers"},
            )(cfg, deterministic, keep_states=output_hidden_states, name="layers")
            kinds_N = jnp.array([cfg.is_global(i) for i in range(1, cfg.num_hidden_layers)])
            x_BxLxD, states_NxBxLxD = stack(x_BxLxD, (masks, ropes), kinds_N)
            hidden.extend(states_NxBxLxD if output_hidden_states else [])
        else:
            for i in range(1, cfg.num_hidden_layers):
                x_BxLxD, _ = layer_cls(cfg, deterministic, name=f"layer_{i}")(
                    x_BxLxD, (masks, ropes), cfg.is_global(i)
                )
                hidden.append(x_BxLxD)
        seq_BxLxD = norm(cfg, "final_norm")(x_BxLxD)
        # hidden_states as transformers reports them: the embeddings, then every layer's output,
        # the last one after the final norm.
        states = (*hidden[:-1], seq_BxLxD) if output_hidden_states else ()
        return BertOutput(sequence_output=seq_BxLxD, pooled_output=None, hidden_states=states)
