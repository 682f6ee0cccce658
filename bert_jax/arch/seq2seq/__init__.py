"""The encoder-decoder family (T5 v1.0/v1.1, the Transformer) in pure Flax Linen."""

from bert_jax.arch.seq2seq.config import Seq2SeqConfig, seq2seq_preset
from bert_jax.arch.seq2seq.model import EncoderDecoder, Seq2SeqOutput
from bert_jax.arch.seq2seq.scan import stack_seq2seq, unstack_seq2seq

__all__ = [
    "EncoderDecoder",
    "Seq2SeqConfig",
    "Seq2SeqOutput",
    "seq2seq_preset",
    "stack_seq2seq",
    "unstack_seq2seq",
]
