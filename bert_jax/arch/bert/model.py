"""The BERT encoder: embeddings -> post-LN Transformer stack -> tanh pooler on [CLS] (the family
switches of `BertConfig` select factorised embeddings, shared layers, position offset, no token
types, no pooler, causal attention).

Packed rows (`pack_BxL`, built by `bert_jax.input.packing`): several sequences per row, attention
kept inside each, positions restarting per sequence; the pooler then reads every sequence's own
[CLS] (its last token under causal attention), B x S x D for S = `max_sequences`, with
`present` (B x S) saying which of the S slots hold a sequence."""

from __future__ import annotations

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from bert_jax.config import BertConfig
from bert_jax.model.embeddings import BertEmbeddings
from bert_jax.model.encoder import Encoder
from bert_jax.model.layers import dense
from bert_jax.model.packing import first_tokens


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


def packed_sentence_slots(
    config: BertConfig, pack_BxL: jax.Array, max_sequences: int
) -> tuple[jax.Array, jax.Array]:
    """(slots B x S, present B x S): where each packed sequence's sentence head reads, its first
    token, or under causal attention its last (the one that has seen the whole sequence)."""
    slots_BxS, present_BxS = first_tokens(pack_BxL, max_sequences)
    if config.causal:
        ids_S = jnp.arange(1, max_sequences + 1, dtype=pack_BxL.dtype)
        lengths_BxS = jnp.sum(pack_BxL[:, None, :] == ids_S[None, :, None], axis=-1)
        slots_BxS = jnp.maximum(slots_BxS + lengths_BxS.astype(jnp.int32) - 1, 0)
    return slots_BxS, present_BxS


def packed_sentence_vectors(
    config: BertConfig, seq_BxLxD: jax.Array, pack_BxL: jax.Array, max_sequences: int
) -> tuple[jax.Array, jax.Array]:
    """(B x S x D hidden states at `packed_sentence_slots`, present B x S)."""
    slots_BxS, present_BxS = packed_sentence_slots(config, pack_BxL, max_sequences)
    return jnp.take_along_axis(seq_BxLxD, slots_BxS[..., None], axis=1), present_BxS


@flax.struct.dataclass
class BertOutput:
    sequence_output: jax.Array  # B x L x D, last layer
    pooled_output: jax.Array | None  # B x D, tanh(dense([CLS])); None without a pooler
    hidden_states: tuple[jax.Array, ...] = ()  # embeddings output then every layer, when requested
    attentions: tuple[jax.Array, ...] = ()  # B x H x L x L per layer, when requested
    # Packed rows: B x S, which sequence slots exist (pooled_output is then B x S x D).
    present: jax.Array | None = None


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
        pack_BxL: jax.Array | None = None,
        max_sequences: int = 1,
    ) -> BertOutput:
        """`pack_BxL`: packed-sequence ids (1..S per token, 0 on padding), None for one sequence
        per row; `max_sequences` (static): the S slots of a packed row the pooler reads."""
        if input_mask_BxL is None:
            input_mask_BxL = jnp.ones_like(input_ids_BxL)
        if segment_ids_BxL is None:
            segment_ids_BxL = jnp.zeros_like(input_ids_BxL)
        x_BxLxD = self.embeddings(
            input_ids_BxL, segment_ids_BxL, input_mask_BxL, deterministic, pack_BxL
        )
        seq_BxLxD, hidden, probs = self.encoder(
            x_BxLxD,
            input_mask_BxL.astype(bool),
            deterministic,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            pack_BxL=pack_BxL,
        )
        present_BxS = None
        if pack_BxL is None:
            first_BxD = sentence_vector(self.config, seq_BxLxD, input_mask_BxL)
        else:  # B x S x D
            first_BxD, present_BxS = packed_sentence_vectors(
                self.config, seq_BxLxD, pack_BxL, max_sequences
            )
        pooled_BxD = jnp.tanh(self.pooler(first_BxD)) if self.has_pooler else None
        return BertOutput(
            sequence_output=seq_BxLxD,
            pooled_output=pooled_BxD,
            hidden_states=(x_BxLxD, *hidden) if output_hidden_states else (),
            attentions=tuple(probs),
            present=present_BxS,
        )

    def attend(self, x_BxPxD: jax.Array) -> jax.Array:
        return self.embeddings.attend(x_BxPxD)
