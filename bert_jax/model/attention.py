"""Multi-head self-attention with a key-padding mask.

The fused `jax.nn.dot_product_attention` is used whenever the probabilities are not needed; when
they are (returned as attention maps, or dropped out in training as the reference does) the same
computation is written out, with the softmax in float32 either way.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.config import BertConfig
from bert_jax.model.layers import compute_dtype, weight_init, zeros_init


class SelfAttention(nn.Module):
    config: BertConfig
    deterministic: bool = True
    output_attentions: bool = False

    @nn.compact
    def __call__(
        self, x_BxLxD: jax.Array, mask_BxL: jax.Array
    ) -> tuple[jax.Array, jax.Array | None]:
        cfg = self.config
        dtype = compute_dtype(cfg)
        heads, head_dim = cfg.num_attention_heads, cfg.head_dim

        def project(name: str) -> jax.Array:
            return nn.DenseGeneral(
                (heads, head_dim),
                dtype=dtype,
                param_dtype=jnp.float32,
                kernel_init=weight_init(cfg, ("embed", "heads", "kv")),
                bias_init=zeros_init(("heads", "kv")),
                name=name,
            )(x_BxLxD)

        q_BxLxHxK, k_BxLxHxK, v_BxLxHxK = project("query"), project("key"), project("value")
        attention_dropout = not self.deterministic and cfg.attention_probs_dropout_prob > 0
        probs_BxHxLxL = None
        if self.output_attentions or attention_dropout:
            scores_BxHxLxL = jnp.einsum(
                "bqhk,bthk->bhqt", q_BxLxHxK, k_BxLxHxK, preferred_element_type=jnp.float32
            ) / jnp.sqrt(jnp.float32(head_dim))
            allowed_BxHxLxL = mask_BxL[:, None, None, :]
            if cfg.causal:
                length = mask_BxL.shape[-1]
                allowed_BxHxLxL = allowed_BxHxLxL & jnp.tril(jnp.ones((length, length), bool))
            scores_BxHxLxL = jnp.where(
                allowed_BxHxLxL, scores_BxHxLxL, jnp.finfo(jnp.float32).min
            )
            probs_BxHxLxL = jax.nn.softmax(scores_BxHxLxL, axis=-1)
            dropped_BxHxLxL = nn.Dropout(cfg.attention_probs_dropout_prob)(
                probs_BxHxLxL, deterministic=self.deterministic
            )
            ctx_BxLxHxK = jnp.einsum("bhqt,bthk->bqhk", dropped_BxHxLxL.astype(dtype), v_BxLxHxK)
        else:
            ctx_BxLxHxK = jax.nn.dot_product_attention(
                q_BxLxHxK, k_BxLxHxK, v_BxLxHxK, mask=mask_BxL[:, None, None, :],
                is_causal=cfg.causal,
            )  # fmt: skip
        out_BxLxD = nn.DenseGeneral(
            cfg.hidden_size,
            axis=(-2, -1),
            dtype=dtype,
            param_dtype=jnp.float32,
            kernel_init=weight_init(cfg, ("heads", "kv", "embed")),
            bias_init=zeros_init(("embed",)),
            name="output",
        )(ctx_BxLxHxK)
        return out_BxLxD, probs_BxHxLxL
