"""ELECTRA's model FLOPs per step: both networks, as ELECTRA's own FLOPs counting does."""

from __future__ import annotations

from bert_jax.arch.bert.flops import encoder_flops_per_token, pretraining_flops_per_step
from bert_jax.arch.electra.model import generator_config
from bert_jax.config import BertConfig


def electra_flops_per_step(
    disc: BertConfig, generator_size: float, batch: int, seq_len: int, predictions: int
) -> float:
    """ELECTRA: the discriminator (encoder + per-token head 6 (d^2 + d)) plus the generator
    (its encoder over every token, its MLM head at the masked positions)."""
    d = disc.hidden_size
    flops = batch * seq_len * (encoder_flops_per_token(disc, seq_len) + 6.0 * (d * d + d))
    gen = generator_config(disc, generator_size)
    return flops + pretraining_flops_per_step(gen, batch, seq_len, predictions, use_nsp=False)
