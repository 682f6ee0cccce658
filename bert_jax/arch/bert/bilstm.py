"""A randomly initialised BiLSTM between an encoder and the output layer: the paper's
feature-based NER tagger (Table 7, over frozen features) and its "+ BiLSTM" fine-tuning arm
(Table 5, over the trainable left-to-right encoder)."""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.arch.bert.model import BertModel, sentence_position
from bert_jax.config import BertConfig


class BiLSTMTagger(nn.Module):
    """`num_layers` bidirectional LSTMs (`lstm_size` units per direction), then a dense layer:
    per-token outputs [B, L, num_labels]."""

    num_labels: int
    lstm_size: int = 768
    num_layers: int = 2

    @nn.compact
    def __call__(self, features_BxLxF, input_mask_BxL, *, deterministic: bool = True):
        x_BxLxF = features_BxLxF.astype(jnp.float32)
        lengths_B = jnp.sum(input_mask_BxL, axis=-1).astype(jnp.int32)
        for i in range(self.num_layers):
            fwd = nn.RNN(nn.OptimizedLSTMCell(self.lstm_size), name=f"fwd_{i}")
            bwd = nn.RNN(nn.OptimizedLSTMCell(self.lstm_size), name=f"bwd_{i}")
            x_BxLxF = nn.Bidirectional(fwd, bwd, name=f"bilstm_{i}")(x_BxLxF, seq_lengths=lengths_B)
            x_BxLxF = nn.Dropout(0.1)(x_BxLxF, deterministic=deterministic)
        return nn.Dense(self.num_labels, name="classifier")(x_BxLxF)


class BertWithBiLSTM(nn.Module):
    """Encoder (`bert`, trainable) -> BiLSTMTagger. `outputs`: "token" [B, L, num_outputs]
    (tagging), "span" (start_BxL, end_BxL) from 2 outputs, "sentence" the outputs at
    `sentence_position` [B, num_outputs]."""

    config: BertConfig
    num_outputs: int
    outputs: str  # token | span | sentence
    lstm_size: int = 256

    @nn.compact
    def __call__(
        self, input_ids_BxL, input_mask_BxL=None, segment_ids_BxL=None, *, deterministic=True
    ):
        if input_mask_BxL is None:
            input_mask_BxL = jnp.ones_like(input_ids_BxL)
        seq_BxLxD = BertModel(self.config, add_pooling_layer=False, name="bert")(
            input_ids_BxL, input_mask_BxL, segment_ids_BxL, deterministic=deterministic
        ).sequence_output
        out_BxLxC = BiLSTMTagger(self.num_outputs, self.lstm_size, name="bilstm")(
            seq_BxLxD, input_mask_BxL, deterministic=deterministic
        )
        if self.outputs == "token":
            return out_BxLxC
        if self.outputs == "span":
            return out_BxLxC[..., 0], out_BxLxC[..., 1]
        at_B = sentence_position(self.config, input_mask_BxL)
        return jnp.take_along_axis(out_BxLxC, at_B[:, None, None], axis=1)[:, 0]
