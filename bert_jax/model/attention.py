"""Multi-head self-attention under an `AttentionMask` (padding, and for packed rows the sequence
each token belongs to; the encoder builds it once for every layer).

`attention_core.attend` (the fused `jax.nn.dot_product_attention` or a named kernel) is used
whenever the probabilities are not needed; when they are (returned as attention maps, or dropped
out in training as the reference does) the same scores are written out, softmax in float32.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.config import BertConfig
from bert_jax.model.attention_core import AttentionMask, attend, attention_scores
from bert_jax.model.layers import DenseGeneral, Dropout, compute_dtype, weight_init, zeros_init


class SelfAttention(nn.Module):
    config: BertConfig
    deterministic: bool = True
    output_attentions: bool = False

    @nn.compact
    def __call__(
        self, x_BxLxD: jax.Array, mask: AttentionMask
    ) -> tuple[jax.Array, jax.Array | None]:
        cfg = self.config
        dtype = compute_dtype(cfg)
        heads, head_dim = cfg.num_attention_heads, cfg.head_dim

        def project(name: str) -> jax.Array:
            return DenseGeneral(
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
            probs_BxHxLxL = jax.nn.softmax(attention_scores(q_BxLxHxK, k_BxLxHxK, mask), axis=-1)
            dropped_BxHxLxL = Dropout(cfg.attention_probs_dropout_prob)(
                probs_BxHxLxL, deterministic=self.deterministic
            )
            ctx_BxLxHxK = jnp.einsum("bhqt,bthk->bqhk", dropped_BxHxLxL.astype(dtype), v_BxLxHxK)
        else:
            ctx_BxLxHxK = attend(
                q_BxLxHxK, k_BxLxHxK, v_BxLxHxK, mask, cfg.attention_implementation
            )
        out_BxLxD = DenseGeneral(
            cfg.hidden_size,
            axis=(-2, -1),
            dtype=dtype,
            param_dtype=jnp.float32,
            kernel_init=weight_init(cfg, ("heads", "kv", "embed")),
            bias_init=zeros_init(("embed",)),
            name="output",
        )(ctx_BxLxHxK)
        return out_BxLxD, probs_BxHxLxL
