"""Building blocks of the encoder-decoder family: norms, position signals, attention with a
key/value cache, and the feed-forward block.

Logical axis names are the encoder's (`vocab`, `embed`, `heads`, `kv`, `mlp`, `layers`) plus
`relpos_buckets` for T5's bias table (no rule: replicated, it is tiny).

Decoding: with `decode=True` a self-attention layer keeps `cached_key`/`cached_value` of a fixed
length in the `cache` collection and writes one step at `index` (given by the decoder stack);
cross-attention keeps the projected encoder keys/values (`cross_key`/`cross_value`), computed
once when the cache is created, so a decoding step projects only the new token.
"""

from __future__ import annotations

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.arch.seq2seq.config import Seq2SeqConfig
from bert_jax.model.layers import Dense, DenseGeneral

NEG_INF = float(np.finfo(np.float32).min)


def init_normal(stddev: float, axes: tuple[str, ...]) -> nn.initializers.Initializer:
    return nn.with_logical_partitioning(jax.nn.initializers.normal(stddev), axes)


def zeros(axes: tuple[str, ...]) -> nn.initializers.Initializer:
    return nn.with_logical_partitioning(nn.initializers.zeros_init(), axes)


class RMSNorm(nn.Module):
    """T5's layer norm: scale only, no mean subtraction, no bias; statistics in float32."""

    epsilon: float
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x_BxLxD: jax.Array) -> jax.Array:
        scale_D = self.param(
            "scale",
            nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
            (x_BxLxD.shape[-1],),
            jnp.float32,
        )
        x32 = x_BxLxD.astype(jnp.float32)
        y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.epsilon)
        return (scale_D * y).astype(self.dtype)


def norm(cfg: Seq2SeqConfig, name: str) -> nn.Module:
    if cfg.norm == "rms_pre":
        return RMSNorm(cfg.layer_norm_epsilon, jnp.dtype(cfg.dtype), name=name)
    return nn.LayerNorm(
        epsilon=cfg.layer_norm_epsilon,
        dtype=jnp.dtype(cfg.dtype),
        param_dtype=jnp.float32,
        scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
        bias_init=zeros(("embed",)),
        name=name,
    )


@functools.lru_cache(maxsize=64)
def relative_buckets(
    rel_min: int, rel_max: int, bidirectional: bool, num_buckets: int, max_distance: int
) -> np.ndarray:
    """T5's bucket of every relative position (key - query) in [rel_min, rel_max]: exact below
    num_buckets/2 (per direction), log-spaced up to max_distance, then clipped. Computed with
    numpy in float32 at trace time (positions are static), which matches transformers'
    `_relative_position_bucket` bucket for bucket."""
    rel = np.arange(rel_min, rel_max + 1)
    out = np.zeros_like(rel)
    n = num_buckets
    if bidirectional:
        n //= 2
        out += (rel > 0) * n
        dist = np.abs(rel)
    else:
        dist = -np.minimum(rel, 0)
    max_exact = n // 2
    ratio = np.maximum(dist, 1).astype(np.float32) / np.float32(max_exact)
    # Same float32 operation order as transformers: log(ratio) / log(max/exact) * (n - exact).
    large = max_exact + (
        np.log(ratio) / np.float32(math.log(max_distance / max_exact)) * np.float32(n - max_exact)
    ).astype(np.int64)
    out += np.where(dist < max_exact, dist, np.minimum(large, n - 1))
    return out.astype(np.int32)


class RelativePositionBias(nn.Module):
    """A learned scalar per (bucket, head), shared by every layer of a stack."""

    cfg: Seq2SeqConfig
    bidirectional: bool

    @nn.compact
    def __call__(self, q_len: int, k_len: int, q_offset: jax.Array | None = None) -> jax.Array:
        """Bias 1xHxQxK for queries at q_offset + [0, q_len) over keys [0, k_len)."""
        cfg = self.cfg
        table_NxH = self.param(
            "embedding",
            init_normal(cfg.d_model**-0.5, ("relpos_buckets", "heads")),
            (cfg.relative_attention_num_buckets, cfg.num_heads),
            jnp.float32,
        )
        # With a traced offset (one decoding step) the query may sit anywhere in [0, k_len).
        lowest = -(q_len - 1) if q_offset is None else -(k_len - 1)
        buckets = relative_buckets(
            lowest, k_len - 1, self.bidirectional,
            cfg.relative_attention_num_buckets, cfg.relative_attention_max_distance,
        )  # fmt: skip
        q_Q = jnp.arange(q_len) + (0 if q_offset is None else q_offset)
        rel_QxK = jnp.arange(k_len)[None, :] - q_Q[:, None]
        bucket_QxK = jnp.asarray(buckets)[rel_QxK - lowest]
        bias_QxKxH = jnp.take(table_NxH, bucket_QxK, axis=0)
        return jnp.transpose(bias_QxKxH, (2, 0, 1))[None]


def sinusoidal(length: int, dim: int) -> np.ndarray:
    """Vaswani et al.'s sin/cos signal, LxD, sines in the first half (tensor2tensor's layout)."""
    half = dim // 2
    inv_freq = np.exp(-math.log(10000.0) * np.arange(half) / max(half - 1, 1))
    angles = np.arange(length)[:, None] * inv_freq[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1).astype(np.float32)


class Attention(nn.Module):
    """Multi-head attention; `bias` (1 or B, H, Q, K; float) carries the position bias and the
    mask (NEG_INF where a key may not be seen). Softmax in float32."""

    cfg: Seq2SeqConfig
    cross: bool = False
    deterministic: bool = True

    def _dense(self, features, axes, in_axes, name: str) -> nn.DenseGeneral:
        cfg = self.cfg
        fan_in = cfg.d_model if name != "out" else cfg.inner_dim
        std = fan_in**-0.5
        if name == "query" and not cfg.scale_attention:
            std = (cfg.d_model * cfg.d_kv) ** -0.5  # T5 folds 1/sqrt(d_kv) into the query init
        return DenseGeneral(
            features,
            axis=in_axes,
            use_bias=cfg.use_bias,
            dtype=jnp.dtype(cfg.dtype),
            param_dtype=jnp.float32,
            kernel_init=init_normal(std, axes),
            bias_init=zeros(axes[len(axes) - (1 if name == "out" else 2) :]),
            name=name,
        )

    def _project(self, x_BxLxD: jax.Array, name: str) -> jax.Array:
        cfg = self.cfg
        return self._dense((cfg.num_heads, cfg.d_kv), ("embed", "heads", "kv"), -1, name)(x_BxLxD)

    @nn.compact
    def __call__(
        self,
        x_BxQxD: jax.Array,
        bias: jax.Array,
        kv_BxKxD: jax.Array | None = None,
        decode: bool = False,
        index: jax.Array | None = None,
    ) -> jax.Array:
        cfg = self.cfg
        dtype = jnp.dtype(cfg.dtype)
        q_BxQxHxK = self._project(x_BxQxD, "query")
        if self.cross and decode:
            # Projected once from the encoder output when the cache is created.
            k_BxKxHxK = self.variable("cache", "cross_key", self._project, kv_BxKxD, "key").value
            v_BxKxHxK = self.variable("cache", "cross_value", self._project, kv_BxKxD,
                                      "value").value  # fmt: skip
        elif self.cross:
            k_BxKxHxK = self._project(kv_BxKxD, "key")
            v_BxKxHxK = self._project(kv_BxKxD, "value")
        else:
            k_BxKxHxK, v_BxKxHxK = self._project(x_BxQxD, "key"), self._project(x_BxQxD, "value")
            if decode:
                k_BxKxHxK, v_BxKxHxK = self._update_cache(k_BxKxHxK, v_BxKxHxK, index)
        scores_BxHxQxK = jnp.einsum(
            "bqhd,bkhd->bhqk", q_BxQxHxK, k_BxKxHxK, preferred_element_type=jnp.float32
        )
        if cfg.scale_attention:
            scores_BxHxQxK = scores_BxHxQxK / jnp.sqrt(jnp.float32(cfg.d_kv))
        probs_BxHxQxK = jax.nn.softmax(scores_BxHxQxK + bias, axis=-1)
        probs_BxHxQxK = nn.Dropout(cfg.dropout_rate)(probs_BxHxQxK, self.deterministic)
        ctx_BxQxHxK = jnp.einsum("bhqk,bkhd->bqhd", probs_BxHxQxK.astype(dtype), v_BxKxHxK)
        return self._dense(cfg.d_model, ("heads", "kv", "embed"), (-2, -1), "out")(ctx_BxQxHxK)

    def _update_cache(self, k_BxTxHxK: jax.Array, v_BxTxHxK: jax.Array, index: jax.Array | None):
        """First call (cache creation, T = the cache length): store zeros, attend as usual.
        Later calls (T = 1): write the step at `index`, attend over the whole cache (the bias
        masks the slots after `index`)."""
        initialised = self.has_variable("cache", "cached_key")
        ck = self.variable("cache", "cached_key", jnp.zeros, k_BxTxHxK.shape, k_BxTxHxK.dtype)
        cv = self.variable("cache", "cached_value", jnp.zeros, v_BxTxHxK.shape, v_BxTxHxK.dtype)
        if not initialised:
            return k_BxTxHxK, v_BxTxHxK
        at = (0, index, 0, 0)
        ck.value = jax.lax.dynamic_update_slice(ck.value, k_BxTxHxK.astype(ck.value.dtype), at)
        cv.value = jax.lax.dynamic_update_slice(cv.value, v_BxTxHxK.astype(cv.value.dtype), at)
        return ck.value, cv.value


class FeedForward(nn.Module):
    cfg: Seq2SeqConfig
    deterministic: bool = True

    @nn.compact
    def __call__(self, x_BxLxD: jax.Array) -> jax.Array:
        cfg = self.cfg
        act = cfg.feed_forward_proj.removeprefix("gated-")
        fn = jax.nn.relu if act == "relu" else functools.partial(jax.nn.gelu, approximate=True)

        def dense(features: int, axes: tuple[str, str], fan_in: int, name: str) -> nn.Dense:
            return Dense(
                features,
                use_bias=cfg.use_bias,
                dtype=jnp.dtype(cfg.dtype),
                param_dtype=jnp.float32,
                kernel_init=init_normal(fan_in**-0.5, axes),
                bias_init=zeros(axes[1:]),
                name=name,
            )

        if cfg.gated:  # T5 v1.1: act(x W0) * (x W1)
            h_BxLxF = fn(dense(cfg.d_ff, ("embed", "mlp"), cfg.d_model, "wi_0")(x_BxLxD))
            h_BxLxF = h_BxLxF * dense(cfg.d_ff, ("embed", "mlp"), cfg.d_model, "wi_1")(x_BxLxD)
        else:
            h_BxLxF = fn(dense(cfg.d_ff, ("embed", "mlp"), cfg.d_model, "wi")(x_BxLxD))
        h_BxLxF = nn.Dropout(cfg.dropout_rate)(h_BxLxF, self.deterministic)
        return dense(cfg.d_model, ("mlp", "embed"), cfg.d_ff, "wo")(h_BxLxF)
