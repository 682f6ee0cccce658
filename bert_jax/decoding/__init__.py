"""Decoding: greedy, beam search and sampling over a fixed-size key/value cache."""

from bert_jax.decoding.search import Sampling, beam_search, greedy_or_sample
from bert_jax.decoding.seq2seq import GenerateSettings, Seq2SeqGenerator, reorder_cache, trim

__all__ = [
    "GenerateSettings",
    "Sampling",
    "Seq2SeqGenerator",
    "beam_search",
    "greedy_or_sample",
    "reorder_cache",
    "trim",
]
