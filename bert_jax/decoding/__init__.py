"""Decoding: greedy, beam search and sampling over a fixed-size key/value cache, whatever the
model. The encoder-decoder's generator is `bert_jax.arch.seq2seq.decoding`; the left-to-right
BERT's is `bert_jax.arch.bert.causal_lm`."""

from bert_jax.decoding.search import Sampling, beam_search, greedy_or_sample

__all__ = ["Sampling", "beam_search", "greedy_or_sample"]
