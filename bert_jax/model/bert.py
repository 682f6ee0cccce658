"""The BERT encoder: embeddings -> post-LN Transformer stack -> tanh pooler on [CLS] (the family
switches of `BertConfig` select factorised embeddings, shared layers, position offset, no token
types, no pooler, causal attention)."""

from __future__ import annotations

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from bert_jax.config import BertConfig
from bert_jax.model.embeddings import BertEmbeddings
from bert_jax.model.encoder import Encoder
from bert_jax.model.layers import dense


def sentence_position(config: BertConfig, input_mask_BxL: jax.Array) -> jax.Array:
    """Where a sentence-level head reads: [CLS] (0), or under causal attention, where [CLS]
    sees only itself, the last real token."""
    if config.causal:
        return jnp.maximum(jnp.sum(input_mask_BxL, axis=-1).astype(jnp.int32) - 1, 0)
    return jnp.zeros(input_mask_BxL.shape[:1], jnp.int32)


def sentence_vector(
    config: BertConfig, seq_BxLxD: jax.Array, input_mask_BxL: jax.Array
) -> jax.Array:
    """The hidden state a sentence-level head reads, at `sentence_position`."""
    at_B = sentence_position(config, input_mask_BxL)
    return jnp.take_along_axis(seq_BxLxD, at_B[:, None, None], axis=1)[:, 0]


@flax.struct.dataclass
class BertOutput:
    sequence_output: jax.Array  # B x L x D, last layer
    pooled_output: jax.Array | None  # B x D, tanh(dense([CLS])); None without a pooler
    hidden_states: tuple[jax.Array, ...] = ()  # embeddings output then every layer, when requested
    attentions: tuple[jax.Array, ...] = ()  # B x H x L x L per layer, when requested


class BertModel(nn.Module):
    config: BertConfig
    add_pooling_layer: bool = True  # and config.pooler

    @property
    def has_pooler(self) -> bool:
        return self.add_pooling_layer and self.config.pooler

    def setup(self) -> None:
        self.embeddings = BertEmbeddings(self.config)
        self.encoder = Encoder(self.config)
        if self.has_pooler:
            self.pooler = dense(
                self.config, self.config.hidden_size, ("embed", "embed_out"), "pooler"
            )

    def __call__(
        self,
        input_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array | None = None,
        segment_ids_BxL: jax.Array | None = None,
        *,
        deterministic: bool = True,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertOutput:
        if input_mask_BxL is None:
            input_mask_BxL = jnp.ones_like(input_ids_BxL)
        if segment_ids_BxL is None:
            segment_ids_BxL = jnp.zeros_like(input_ids_BxL)
        x_BxLxD = self.embeddings(input_ids_BxL, segment_ids_BxL, input_mask_BxL, deterministic)
        seq_BxLxD, hidden, probs = self.encoder(
            x_BxLxD,
            input_mask_BxL.astype(bool),
            deterministic,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        pooled_BxD = None
        if self.has_pooler:
            pooled_BxD = jnp.tanh(
                self.pooler(sentence_vector(self.config, seq_BxLxD, input_mask_BxL))
            )
        return BertOutput(
            sequence_output=seq_BxLxD,
            pooled_output=pooled_BxD,
            hidden_states=(x_BxLxD, *hidden) if output_hidden_states else (),
            attentions=tuple(probs),
        )

    def attend(self, x_BxPxD: jax.Array) -> jax.Array:
        return self.embeddings.attend(x_BxPxD)
