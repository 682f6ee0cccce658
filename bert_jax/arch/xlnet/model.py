"""XLNet (Yang et al. 2019) in Flax Linen: Transformer-XL layers with two-stream self-attention.

Both streams share every weight. The content stream h_BxLxD is an ordinary encoder whose
attention is restricted by the permutation mask (a token sees the tokens before it in the
factorisation order, and itself); the query stream g starts from one learned vector (`mask_emb`)
per predicted position and sees the same context but never its own token, so it can predict that
token knowing only its position. Positions enter only through relative encodings: sinusoids of
the distance i - j projected by `r`, with a content bias `r_w_bias` and a position bias
`r_r_bias` added to the query (Transformer-XL's u and v); segments enter only as "same segment or
not" through `seg_embed` and `r_s_bias`. `mems` (per layer, the previous segment's content-stream
inputs) extend the keys without gradient (segment recurrence).

Conventions are Hugging Face's so its checkpoints and tests line up: `perm_mask[b, i, j] = 1`
means i may NOT attend to j; `target_mapping[b, p, j] = 1` means prediction p is of position j;
`input_mask` here is 1 for real tokens (HF's `attention_mask`). Arrays are batch-major
(x_BxLxD); parameter names follow HF's (`rel_attn/q`, `ff/layer_1`, ...).
"""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax.core import meta

from bert_jax.arch.xlnet.config import XLNetConfig
from bert_jax.model.layers import Embed, constrain_batch, dense, layer_norm, weight_init, zeros_init

_BLOCKED = 1e30  # subtracted from blocked scores (as HF; a fully blocked row becomes uniform)


class XLNetOutput(NamedTuple):
    content_BxLxD: jax.Array  # content stream after the last layer
    query_BxPxD: jax.Array | None  # query stream at the P predicted positions (target_mapping)
    new_mems_NxBxMxD: jax.Array | None  # memory for the next segment (when mem_len is set)
    hidden_states: tuple[jax.Array, ...] | None  # content stream: embeddings, then every layer


def relative_positions(cfg: XLNetConfig, qlen: int, klen: int) -> jax.Array:
    """Sinusoidal encodings of the distances klen, klen-1, ..., -qlen+1 ([klen + qlen, D]; row p
    is distance klen - p). After `rel_shift`, query i (absolute position mlen + i) and key j
    read distance (mlen + i) - j."""
    pos_R = jnp.arange(klen, -qlen, -1, dtype=jnp.float32)
    if cfg.clamp_len > 0:
        pos_R = jnp.clip(pos_R, -cfg.clamp_len, cfg.clamp_len)
    inv_freq_F = 1.0 / (10000.0 ** (jnp.arange(0, cfg.d_model, 2, dtype=jnp.float32) / cfg.d_model))
    angle_RxF = pos_R[:, None] * inv_freq_F[None, :]
    return jnp.concatenate([jnp.sin(angle_RxF), jnp.cos(angle_RxF)], axis=-1)


def rel_shift(x_BxHxIxR: jax.Array, klen: int) -> jax.Array:
    """Scores against the table of `relative_positions` -> scores against key j: column j of row
    i moves from table index qlen - i + j (Transformer-XL's pad-free reshape trick)."""
    b, h, i, r = x_BxHxIxR.shape
    x = x_BxHxIxR.reshape(b, h, r, i)[:, :, 1:, :].reshape(b, h, i, r - 1)
    return x[..., :klen]


class RelativeAttention(nn.Module):
    """Attention with relative positions and segments, and its post-attention residual + LN."""

    config: XLNetConfig
    deterministic: bool = True

    def setup(self) -> None:
        cfg = self.config
        shape, axes = (cfg.d_model, cfg.n_head, cfg.d_head), ("embed", "heads", "kv")
        for name in ("q", "k", "v", "o", "r"):
            setattr(self, name, self.param(name, weight_init(cfg, axes), shape, jnp.float32))
        bias_axes = ("heads", "kv")
        for name in ("r_w_bias", "r_r_bias", "r_s_bias"):
            init = weight_init(cfg, bias_axes)
            setattr(self, name, self.param(name, init, shape[1:], jnp.float32))
        seg_init = weight_init(cfg, ("segment", "heads", "kv"))
        self.seg_embed = self.param("seg_embed", seg_init, (2,) + shape[1:], jnp.float32)
        self.layer_norm = layer_norm(cfg, "layer_norm")
        self.drop = nn.Dropout(cfg.dropout)

    def core(self, q_BxIxHxK, k_BxJxHxK, v_BxJxHxK, r_RxHxK, seg_diff_BxIxJ, blocked_BxIxJ):
        dtype = jnp.dtype(self.config.dtype)
        klen = k_BxJxHxK.shape[1]
        ac_BxHxIxJ = jnp.einsum(
            "bihd,bjhd->bhij", q_BxIxHxK + self.r_w_bias.astype(dtype), k_BxJxHxK,
            preferred_element_type=jnp.float32,
        )  # fmt: skip
        bd_BxHxIxR = jnp.einsum(
            "bihd,rhd->bhir", q_BxIxHxK + self.r_r_bias.astype(dtype), r_RxHxK,
            preferred_element_type=jnp.float32,
        )  # fmt: skip
        score_BxHxIxJ = ac_BxHxIxJ + rel_shift(bd_BxHxIxR, klen)
        if seg_diff_BxIxJ is not None:
            ef_BxHxIx2 = jnp.einsum(
                "bihd,shd->bhis", q_BxIxHxK + self.r_s_bias.astype(dtype),
                self.seg_embed.astype(dtype), preferred_element_type=jnp.float32,
            )  # fmt: skip
            score_BxHxIxJ += jnp.where(
                seg_diff_BxIxJ[:, None], ef_BxHxIx2[..., 1:2], ef_BxHxIx2[..., 0:1]
            )
        score_BxHxIxJ = score_BxHxIxJ / jnp.sqrt(jnp.float32(self.config.d_head))
        score_BxHxIxJ = score_BxHxIxJ - _BLOCKED * blocked_BxIxJ[:, None].astype(jnp.float32)
        prob_BxHxIxJ = jax.nn.softmax(score_BxHxIxJ, axis=-1)
        prob_BxHxIxJ = self.drop(prob_BxHxIxJ, deterministic=self.deterministic)
        return jnp.einsum("bhij,bjhd->bihd", prob_BxHxIxJ.astype(dtype), v_BxJxHxK)

    def post(self, x_BxIxD, vec_BxIxHxK):
        dtype = jnp.dtype(self.config.dtype)
        out_BxIxD = jnp.einsum("bihd,Dhd->biD", vec_BxIxHxK, self.o.astype(dtype))
        out_BxIxD = self.drop(out_BxIxD, deterministic=self.deterministic)
        return self.layer_norm(out_BxIxD + x_BxIxD)

    def __call__(self, h_BxLxD, g_BxPxD, mem_BxMxD, pos_RxD, seg_diff_BxLxJ, blocked_h_BxLxJ,
                 blocked_g_BxLxJ, target_mapping_BxPxL):  # fmt: skip
        dtype = jnp.dtype(self.config.dtype)
        cat_BxJxD = h_BxLxD if mem_BxMxD is None else jnp.concatenate([mem_BxMxD, h_BxLxD], 1)
        proj = lambda x, w: jnp.einsum("bid,dhk->bihk", x.astype(dtype), w.astype(dtype))
        k_BxJxHxK, v_BxJxHxK = proj(cat_BxJxD, self.k), proj(cat_BxJxD, self.v)
        r_RxHxK = jnp.einsum("rd,dhk->rhk", pos_RxD.astype(dtype), self.r.astype(dtype))
        kv = (k_BxJxHxK, v_BxJxHxK, r_RxHxK, seg_diff_BxLxJ)
        vec_h = self.core(proj(h_BxLxD, self.q), *kv, blocked_h_BxLxJ)
        out_h_BxLxD = self.post(h_BxLxD, vec_h)
        if g_BxPxD is None:
            return out_h_BxLxD, None
        # Each prediction's query is placed at the position it predicts, attends with that
        # position's query-stream mask, and is gathered back.
        tm_BxPxL = target_mapping_BxPxL.astype(dtype)
        q_g_BxLxHxK = jnp.einsum("bphk,bpl->blhk", proj(g_BxPxD, self.q), tm_BxPxL)
        vec_g_BxLxHxK = self.core(q_g_BxLxHxK, *kv, blocked_g_BxLxJ)
        vec_g_BxPxHxK = jnp.einsum("blhk,bpl->bphk", vec_g_BxLxHxK, tm_BxPxL)
        return out_h_BxLxD, self.post(g_BxPxD, vec_g_BxPxHxK)


class FeedForward(nn.Module):
    config: XLNetConfig
    deterministic: bool = True

    @nn.compact
    def __call__(self, x_BxLxD: jax.Array) -> jax.Array:
        cfg = self.config
        act = jax.nn.relu if cfg.ff_activation == "relu" else lambda x: jax.nn.gelu(x, False)
        drop = nn.Dropout(cfg.dropout, deterministic=self.deterministic)
        y_BxLxF = drop(act(dense(cfg, cfg.d_inner, ("embed", "mlp"), "layer_1")(x_BxLxD)))
        y_BxLxD = drop(dense(cfg, cfg.d_model, ("mlp", "embed"), "layer_2")(y_BxLxF))
        return layer_norm(cfg, "layer_norm")(y_BxLxD + x_BxLxD)


class XLNetLayer(nn.Module):
    config: XLNetConfig
    deterministic: bool = True

    @nn.compact
    def __call__(self, h_BxLxD, g_BxPxD, mem_BxMxD, pos_RxD, seg_diff, blocked_h, blocked_g, tm):
        h_BxLxD, g_BxPxD = RelativeAttention(self.config, self.deterministic, name="rel_attn")(
            h_BxLxD, g_BxPxD, mem_BxMxD, pos_RxD, seg_diff, blocked_h, blocked_g, tm
        )
        ff = FeedForward(self.config, self.deterministic, name="ff")
        return constrain_batch(ff(h_BxLxD)), (None if g_BxPxD is None else ff(g_BxPxD))


class XLNet(nn.Module):
    """The XLNet encoder (HF `XLNetModel`): word embeddings, `mask_emb`, `layer_{i}`."""

    config: XLNetConfig

    @nn.compact
    def __call__(
        self,
        input_ids_BxL: jax.Array,
        segment_ids_BxL: jax.Array | None = None,
        input_mask_BxL: jax.Array | None = None,
        perm_mask_BxLxL: jax.Array | None = None,
        target_mapping_BxPxL: jax.Array | None = None,
        mems_NxBxMxD: jax.Array | None = None,
        *,
        deterministic: bool = True,
        output_hidden_states: bool = False,
    ) -> XLNetOutput:
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)
        b, qlen = input_ids_BxL.shape
        mlen = 0 if mems_NxBxMxD is None else mems_NxBxMxD.shape[2]
        klen = mlen + qlen
        drop = nn.Dropout(cfg.dropout, deterministic=deterministic)

        # Blocked keys: padding (for every query) and the permutation mask; memory is visible.
        blocked_BxLxL = jnp.zeros((b, qlen, qlen), bool)
        if input_mask_BxL is not None:
            blocked_BxLxL |= (input_mask_BxL == 0)[:, None, :]
        if perm_mask_BxLxL is not None:
            blocked_BxLxL |= perm_mask_BxLxL > 0
        blocked_g_BxLxJ = jnp.concatenate([jnp.zeros((b, qlen, mlen), bool), blocked_BxLxL], 2)
        # The content stream also sees its own token (the query stream must not).
        own_LxJ = jnp.arange(klen)[None, :] == (mlen + jnp.arange(qlen))[:, None]
        blocked_h_BxLxJ = blocked_g_BxLxJ & ~own_LxJ[None]

        seg_diff_BxLxJ = None
        if segment_ids_BxL is not None:  # memory counts as segment 0, as HF
            seg_BxL = segment_ids_BxL.astype(jnp.int32)
            cat_BxJ = jnp.concatenate([jnp.zeros((b, mlen), jnp.int32), seg_BxL], 1)
            seg_diff_BxLxJ = seg_BxL[:, :, None] != cat_BxJ[:, None, :]

        embed = Embed(
            cfg.vocab_size, cfg.d_model, dtype=dtype, param_dtype=jnp.float32,
            embedding_init=weight_init(cfg, ("vocab", "embed")), name="word_embedding",
        )  # fmt: skip
        h_BxLxD = drop(embed(input_ids_BxL))
        mask_emb = self.param("mask_emb", weight_init(cfg, ("embed",)), (cfg.d_model,))
        g_BxPxD = None
        if target_mapping_BxPxL is not None:
            p = target_mapping_BxPxL.shape[1]
            g_BxPxD = drop(jnp.broadcast_to(mask_emb.astype(dtype), (b, p, cfg.d_model)))
        pos_RxD = drop(relative_positions(cfg, qlen, klen))

        layer_cls = nn.remat(XLNetLayer) if cfg.remat else XLNetLayer
        new_mems, hidden = [], [h_BxLxD]
        for i in range(cfg.n_layer):
            mem_BxMxD = None if mems_NxBxMxD is None else mems_NxBxMxD[i]
            if cfg.mem_len:
                new_mems.append(self._cache(h_BxLxD, mem_BxMxD))
            h_BxLxD, g_BxPxD = layer_cls(cfg, deterministic, name=f"layer_{i}")(
                h_BxLxD, g_BxPxD, mem_BxMxD, pos_RxD, seg_diff_BxLxJ,
                blocked_h_BxLxJ, blocked_g_BxLxJ, target_mapping_BxPxL,
            )  # fmt: skip
            hidden.append(h_BxLxD)
        return XLNetOutput(
            drop(h_BxLxD),
            None if g_BxPxD is None else drop(g_BxPxD),
            jnp.stack(new_mems) if new_mems else None,
            tuple(hidden) if output_hidden_states else None,
        )

    def _cache(self, h_BxLxD: jax.Array, mem_BxMxD: jax.Array | None) -> jax.Array:
        """The next segment's memory for one layer: the last `mem_len` of (old memory, the first
        `reuse_len` positions of this layer's input), without gradient."""
        cfg = self.config
        cur = h_BxLxD[:, : cfg.reuse_len] if cfg.reuse_len else h_BxLxD
        cat = cur if mem_BxMxD is None else jnp.concatenate([mem_BxMxD.astype(cur.dtype), cur], 1)
        return jax.lax.stop_gradient(cat[:, -cfg.mem_len :])


class XLNetLM(nn.Module):
    """HF `XLNetLMHeadModel`: the encoder under `transformer`, logits = x E^T + `lm_loss_bias`
    (the output projection is tied to the word embeddings). Logits are of the query stream when
    `target_mapping` is given (the permutation LM), else of the content stream."""

    config: XLNetConfig

    @nn.compact
    def __call__(self, input_ids_BxL, segment_ids_BxL=None, input_mask_BxL=None,
                 perm_mask_BxLxL=None, target_mapping_BxPxL=None, mems_NxBxMxD=None, *,
                 deterministic: bool = True, output_hidden_states: bool = False,
                 ) -> tuple[jax.Array, XLNetOutput]:  # fmt: skip
        model = XLNet(self.config, name="transformer")
        out = model(
            input_ids_BxL, segment_ids_BxL, input_mask_BxL, perm_mask_BxLxL,
            target_mapping_BxPxL, mems_NxBxMxD, deterministic=deterministic,
            output_hidden_states=output_hidden_states,
        )  # fmt: skip
        x_BxTxD = out.content_BxLxD if out.query_BxPxD is None else out.query_BxPxD
        table_VxD = meta.unbox(model.variables["params"]["word_embedding"]["embedding"])
        bias_V = self.param("lm_loss_bias", zeros_init(("vocab",)), (self.config.vocab_size,))
        logits_BxTxV = jnp.einsum(
            "btd,vd->btv", x_BxTxD, jnp.asarray(table_VxD, x_BxTxD.dtype),
            preferred_element_type=jnp.float32,
        )  # fmt: skip
        return logits_BxTxV + bias_V, out
