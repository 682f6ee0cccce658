"""The toy encoder and its pretraining model. It reads the task's batch as BERT's models do and
answers with the pretraining output the shared losses read."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.arch.bert.heads import PretrainingOutput
from bert_jax.config import BertConfig


class BagOfContextLM(nn.Module):
    """token embedding + mean of the row's embeddings -> dense + GELU -> logits over the vocab,
    read at the masked positions."""

    config: BertConfig

    @nn.compact
    def __call__(
        self,
        input_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array | None = None,
        segment_ids_BxL: jax.Array | None = None,
        masked_lm_positions_BxP: jax.Array | None = None,
        *,
        deterministic: bool = True,
        pack_BxL: jax.Array | None = None,
    ) -> PretrainingOutput:
        del segment_ids_BxL, deterministic, pack_BxL
        c = self.config
        embed = nn.Embed(c.vocab_size, c.hidden_size, name="embed")
        x_BxLxD = embed(input_ids_BxL)
        if input_mask_BxL is None:
            input_mask_BxL = jnp.ones_like(input_ids_BxL)
        mask_BxLx1 = input_mask_BxL[..., None].astype(x_BxLxD.dtype)
        context_Bx1xD = (x_BxLxD * mask_BxLx1).sum(1, keepdims=True) / jnp.maximum(
            mask_BxLx1.sum(1, keepdims=True), 1.0
        )
        h_BxLxD = nn.gelu(nn.Dense(c.hidden_size, name="mix")(x_BxLxD + context_Bx1xD))
        if masked_lm_positions_BxP is not None:
            h_BxLxD = jnp.take_along_axis(h_BxLxD, masked_lm_positions_BxP[..., None], axis=1)
        return PretrainingOutput(mlm_logits=embed.attend(h_BxLxD), nsp_logits=None, encoder=None)


def flops_per_step(config: BertConfig, batch: int, seq_len: int, predictions: int) -> float:
    """Matmul FLOPs x 3 (forward + backward): the dense layer at every token, the tied decoder
    at the predictions."""
    d, v = config.hidden_size, config.vocab_size
    return 3.0 * 2.0 * batch * (seq_len * d * d + predictions * d * v)
