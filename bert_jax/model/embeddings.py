"""Word + learned position (+ token-type) embeddings, then LayerNorm and dropout, and for
factorised embeddings (ALBERT, ELECTRA) a dense projection from their width E to the hidden size.
In a packed row (`pack_BxL`) positions restart in every sequence; token types stay per example."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.config import BertConfig
from bert_jax.model.layers import (
    Dropout,
    Embed,
    compute_dtype,
    constrain_batch,
    dense,
    embed_axis,
    layer_norm,
    weight_init,
)
from bert_jax.model.packing import pack_positions


def position_ids(
    config: BertConfig, input_mask_BxL: jax.Array, pack_BxL: jax.Array | None = None
) -> jax.Array:
    """BERT: 0, 1, ... for every slot. With an offset (RoBERTa), as transformers computes them
    from the padding: real tokens count up from the offset, padding takes offset - 1. Packed:
    each sequence counts from 0 (from the offset), as it would alone in its own row."""
    seq_len = input_mask_BxL.shape[-1]
    if pack_BxL is not None:
        within_BxL = pack_positions(pack_BxL)
        if not config.position_offset:
            return within_BxL
        offset = config.position_offset
        return jnp.where(pack_BxL > 0, within_BxL + offset, offset - 1)
    if not config.position_offset:
        return jnp.arange(seq_len)[None, :]
    real_BxL = input_mask_BxL.astype(jnp.int32)
    return jnp.cumsum(real_BxL, axis=-1) * real_BxL + (config.position_offset - 1)


class BertEmbeddings(nn.Module):
    config: BertConfig

    def setup(self) -> None:
        cfg = self.config
        width, axis = cfg.embed_dim, embed_axis(cfg)
        embed = dict(dtype=compute_dtype(cfg), param_dtype=jnp.float32)
        self.word_embeddings = Embed(
            cfg.vocab_size, width, embedding_init=weight_init(cfg, ("vocab", axis)), **embed
        )
        self.position_embeddings = Embed(
            cfg.max_position_embeddings,
            width,
            embedding_init=weight_init(cfg, ("position", axis)),
            **embed,
        )
        if cfg.type_vocab_size:
            self.token_type_embeddings = Embed(
                cfg.type_vocab_size,
                width,
                embedding_init=weight_init(cfg, ("segment", axis)),
                **embed,
            )
        self.layer_norm = layer_norm(cfg, "layer_norm", axis)
        self.dropout = Dropout(cfg.hidden_dropout_prob)
        if cfg.embedding_size is not None:
            self.projection = dense(cfg, cfg.hidden_size, (axis, "embed"), "projection")

    def __call__(
        self,
        input_ids_BxL: jax.Array,
        segment_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array,
        deterministic: bool,
        pack_BxL: jax.Array | None = None,
    ) -> jax.Array:
        x_BxLxE = self.embed(
            input_ids_BxL, segment_ids_BxL, input_mask_BxL, deterministic, pack_BxL
        )
        if self.config.embedding_size is None:
            return constrain_batch(x_BxLxE)
        return constrain_batch(self.projection(x_BxLxE))

    def embed(
        self,
        input_ids_BxL: jax.Array,
        segment_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array,
        deterministic: bool,
        pack_BxL: jax.Array | None = None,
    ) -> jax.Array:
        """The tables' sum, normalised and dropped out, at width E before any projection (what
        ELECTRA's generator shares with its discriminator)."""
        cfg = self.config
        seq_len = input_ids_BxL.shape[-1]
        if seq_len > cfg.max_sequence_length:
            offset = f" - position_offset {cfg.position_offset}" if cfg.position_offset else ""
            raise ValueError(
                f"sequence length {seq_len} > max_position_embeddings "
                f"{cfg.max_position_embeddings}{offset}"
            )
        # Summed in float32 (as PyTorch's autocast keeps embeddings); LayerNorm casts its output.
        f32 = jnp.float32
        x_BxLxE = self.word_embeddings(input_ids_BxL, f32) + self.position_embeddings(
            position_ids(cfg, input_mask_BxL, pack_BxL), f32
        )
        if cfg.type_vocab_size:
            # A one-hot matmul, as the reference does for this tiny vocabulary: its gradient is
            # a matmul, not a scatter-add with every token onto two rows (GPU atomics contend
            # on them, and their order makes the sum nondeterministic).
            # One row (RoBERTa): every token gets it, whatever its segment id, as nn.Embed does.
            segments_BxL = segment_ids_BxL if cfg.type_vocab_size > 1 else 0 * segment_ids_BxL
            types_BxLxT = jax.nn.one_hot(segments_BxL, cfg.type_vocab_size, dtype=f32)
            table_TxE = self.token_type_embeddings.embedding
            x_BxLxE = x_BxLxE + jnp.einsum(
                "blt,te->ble", types_BxLxT, table_TxE, precision=jax.lax.Precision.HIGHEST
            )
        return self.dropout(self.layer_norm(x_BxLxE), deterministic=deterministic)

    def attend(self, x_BxPxE: jax.Array) -> jax.Array:
        """Project onto the word-embedding table: the MLM decoder tied to the input embeddings."""
        return self.word_embeddings.attend(x_BxPxE)
