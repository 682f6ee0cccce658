"""The model the Transformer replaced: an LSTM encoder-decoder with Luong ("general") attention
over the encoder states (Luong et al. 2015), as a small baseline on the same data, loop and
decoding as the Transformer and T5.

    h_t = LSTM(embed(y_{t-1}), state_{t-1})           decoder state (starts from the encoder's)
    a_t = softmax_s(h_t^T W_a e_s)                    over the real source positions
    h~_t = tanh(W_c [a_t . e; h_t]);  logits_t = W_o h~_t

`decode_step` advances one token with an explicit cache (LSTM carry + encoder states), so the
search functions of `bert_jax.decoding` drive it as they drive the Transformer's KV cache.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.arch.seq2seq.layers import NEG_INF
from bert_jax.arch.seq2seq.model import Seq2SeqOutput
from bert_jax.config import FrozenConfig


@dataclasses.dataclass(frozen=True)
class RnnConfig(FrozenConfig):
    vocab_size: int
    embed_dim: int = 64
    hidden_size: int = 128
    label_smoothing: float = 0.0
    pad_token_id: int = 0
    eos_token_id: int = 1
    decoder_start_token_id: int = 0
    family: str = "rnn"

    def weight_flops_per_sequence(self, inputs_length: int, targets_length: int) -> float:
        """Matmul weight MACs per (inputs, targets) pair: the LSTMs' 4 gates, attention and the
        output layer on every token (a training step costs 6 FLOPs per MAC)."""
        h, e, v = self.hidden_size, self.embed_dim, self.vocab_size
        per_token = 2 * 4 * h * (h + e) + 3 * h * h + h * v
        return float(per_token * (inputs_length + targets_length))


class DecoderStep(nn.Module):
    """One decoder step; `nn.scan` runs it over the target (training) or once (a decoding
    step), with the same parameters."""

    config: RnnConfig

    @nn.compact
    def __call__(self, cache: tuple, y_BxE: jax.Array) -> tuple[tuple, jax.Array]:
        cfg = self.config
        carry, enc_BxSxH, mask_BxS = cache
        carry, h_BxH = nn.OptimizedLSTMCell(cfg.hidden_size, name="cell")(carry, y_BxE)
        keys_BxSxH = nn.Dense(cfg.hidden_size, use_bias=False, name="attention")(enc_BxSxH)
        scores_BxS = jnp.einsum("bsh,bh->bs", keys_BxSxH, h_BxH)  # Luong's "general" score
        probs_BxS = jax.nn.softmax(jnp.where(mask_BxS > 0, scores_BxS, NEG_INF), axis=-1)
        ctx_BxH = jnp.einsum("bs,bsh->bh", probs_BxS, enc_BxSxH)
        both_Bx2H = jnp.concatenate([ctx_BxH, h_BxH], axis=-1)
        out_BxH = jnp.tanh(nn.Dense(cfg.hidden_size, use_bias=False, name="combine")(both_Bx2H))
        logits_BxV = nn.Dense(cfg.vocab_size, name="output")(out_BxH).astype(jnp.float32)
        return (carry, enc_BxSxH, mask_BxS), logits_BxV


class RnnEncoderDecoder(nn.Module):
    config: RnnConfig

    def setup(self) -> None:
        cfg = self.config
        self.embed = nn.Embed(cfg.vocab_size, cfg.embed_dim)
        self.encoder = nn.RNN(nn.OptimizedLSTMCell(cfg.hidden_size), return_carry=True)
        self.decoder = nn.scan(
            DecoderStep, variable_broadcast="params", split_rngs={"params": False},
            in_axes=1, out_axes=1,
        )(cfg)  # fmt: skip

    def encode(self, ids_BxS: jax.Array, mask_BxS: jax.Array):
        lengths_B = jnp.sum(mask_BxS, axis=-1).astype(jnp.int32)
        carry, enc_BxSxH = self.encoder(self.embed(ids_BxS), seq_lengths=lengths_B)
        return carry, enc_BxSxH

    def decode_step(self, cache: tuple, ids_BxT: jax.Array) -> tuple[jax.Array, tuple]:
        """(logits BxTxV, new cache); cache = (LSTM carry, encoder states, source mask)."""
        cache, logits_BxTxV = self.decoder(cache, self.embed(ids_BxT))
        return logits_BxTxV, cache

    def __call__(
        self,
        encoder_input_ids_BxS: jax.Array,
        encoder_mask_BxS: jax.Array,
        decoder_input_ids_BxT: jax.Array,
        deterministic: bool = True,
    ) -> Seq2SeqOutput:
        carry, enc_BxSxH = self.encode(encoder_input_ids_BxS, encoder_mask_BxS)
        logits_BxTxV, _ = self.decode_step((carry, enc_BxSxH, encoder_mask_BxS),
                                           decoder_input_ids_BxT)  # fmt: skip
        return Seq2SeqOutput(logits_BxTxV, enc_BxSxH, jnp.zeros(logits_BxTxV.shape[:2]))
