"""Text (pair) -> model inputs, shared by the tasks: `[CLS] A [SEP] (B [SEP])`, zero padded, or
the tokenizer's own layout (`tokenizer.layout`, bert_jax.tokenization.layout: RoBERTa's
`<s> A </s></s> B </s>`, token types all 0, padded with <pad>).

    ids, mask, segments = encode_text_pair(tokenizer, text_a, text_b, max_seq_length)
    ids, mask, segments = pack(tokenizer, tokens_a, tokens_b, max_seq_length)  # pre-truncated

As run_classifier.py: a second text without word pieces (None, empty, whitespace, or only
characters the tokenizer drops such as zero-width and control characters) gives the single
sequence `[CLS] A [SEP]` cut at L-2 pieces; pairs are truncated to L-3 (RoBERTa: L-4) by popping
from the longer side (B on ties).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from bert_jax.tokenization.layout import layout_of


class Tokenizer(Protocol):
    """What the tasks need from `bert_jax.tokenization.FullTokenizer`."""

    vocab: dict[str, int]

    def tokenize(self, text: str) -> list[str]: ...

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]: ...


def truncate_seq_pair(tokens_a: list[str], tokens_b: list[str], max_length: int) -> None:
    """Pop from the end of the longer list (B on ties, as the reference) until both fit."""
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def pack(
    tokenizer: Tokenizer, tokens_a: list[str], tokens_b: list[str] | None, max_seq_length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Already-truncated pieces -> (input_ids, input_mask, segment_ids), each int32 [L]."""
    layout = layout_of(tokenizer)
    if tokens_b is None:
        tokens = [layout.cls, *tokens_a, layout.sep]
        segments = [0] * len(tokens)
    else:
        tokens = [layout.cls, *tokens_a, *layout.pair_sep]
        segments = [0] * len(tokens)
        tokens += [*tokens_b, layout.sep]
        segments += [layout.segment_b] * (len(tokens_b) + 1)
    ids = np.full(max_seq_length, layout.pad_id(tokenizer.vocab), np.int32)
    mask = np.zeros(max_seq_length, np.int32)
    seg = np.zeros(max_seq_length, np.int32)
    n = len(tokens)
    ids[:n] = tokenizer.convert_tokens_to_ids(tokens)
    mask[:n] = 1
    seg[:n] = segments
    return ids, mask, seg


def encode_text_pair(
    tokenizer: Tokenizer, text_a: str, text_b: str | None, max_seq_length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tokens_a = tokenizer.tokenize(text_a)
    tokens_b = tokenizer.tokenize(text_b) if text_b else None
    if tokens_b:
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - layout_of(tokenizer).pair_overhead())
        return pack(tokenizer, tokens_a, tokens_b, max_seq_length)
    return pack(tokenizer, tokens_a[: max_seq_length - 2], None, max_seq_length)
