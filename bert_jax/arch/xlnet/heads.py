"""XLNet's fine-tuning heads, as Hugging Face's classes (same parameter names, so their
checkpoints load): sequence classification reads the LAST position (XLNet pads on the left and
puts <cls> at the end), token classification and span QA project every position. All run the
content stream only, without permutation masks."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.arch.xlnet.config import XLNetConfig
from bert_jax.arch.xlnet.model import XLNet
from bert_jax.model.layers import dense


class XLNetForSequenceClassification(nn.Module):
    """HF `XLNetForSequenceClassification`: summary = tanh(W h_last + b) (`sequence_summary`,
    dropout after it), logits = `logits_proj`(summary)."""

    config: XLNetConfig
    num_labels: int

    @nn.compact
    def __call__(self, input_ids_BxL, segment_ids_BxL=None, input_mask_BxL=None, *,
                 deterministic: bool = True) -> jax.Array:  # fmt: skip
        cfg = self.config
        h_BxLxD = XLNet(cfg, name="transformer")(
            input_ids_BxL, segment_ids_BxL, input_mask_BxL, deterministic=deterministic
        ).content_BxLxD
        summary = nn.Dense(cfg.d_model, name="summary")  # HF: sequence_summary.summary
        s_BxD = jnp.tanh(summary(h_BxLxD[:, -1].astype(jnp.float32)))
        s_BxD = nn.Dropout(cfg.dropout)(s_BxD, deterministic=deterministic)
        return nn.Dense(self.num_labels, name="logits_proj")(s_BxD)


class XLNetForQuestionAnsweringSimple(nn.Module):
    """HF `XLNetForQuestionAnsweringSimple`: (start_BxL, end_BxL) from `qa_outputs`."""

    config: XLNetConfig

    @nn.compact
    def __call__(self, input_ids_BxL, segment_ids_BxL=None, input_mask_BxL=None, *,
                 deterministic: bool = True) -> tuple[jax.Array, jax.Array]:  # fmt: skip
        h_BxLxD = XLNet(self.config, name="transformer")(
            input_ids_BxL, segment_ids_BxL, input_mask_BxL, deterministic=deterministic
        ).content_BxLxD
        logits_BxLx2 = dense(self.config, 2, ("embed", "classes"), "qa_outputs")(h_BxLxD)
        logits_BxLx2 = logits_BxLx2.astype(jnp.float32)
        return logits_BxLx2[..., 0], logits_BxLx2[..., 1]


class XLNetForTokenClassification(nn.Module):
    """HF `XLNetForTokenClassification`: per-position logits from `classifier`."""

    config: XLNetConfig
    num_labels: int

    @nn.compact
    def __call__(self, input_ids_BxL, segment_ids_BxL=None, input_mask_BxL=None, *,
                 deterministic: bool = True) -> jax.Array:  # fmt: skip
        h_BxLxD = XLNet(self.config, name="transformer")(
            input_ids_BxL, segment_ids_BxL, input_mask_BxL, deterministic=deterministic
        ).content_BxLxD
        logits = dense(self.config, self.num_labels, ("embed", "classes"), "classifier")(h_BxLxD)
        return logits.astype(jnp.float32)
