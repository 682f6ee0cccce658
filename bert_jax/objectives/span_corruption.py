"""T5's span corruption (Raffel et al. 2020, §3.1.4): drop 15% of the tokens in spans of mean
length 3, put one sentinel in the inputs where each span was, and make the targets the dropped
spans, each after its sentinel. Numpy only: the data pipeline (static shards) and the input
pipeline (dynamic corruption) run the same functions.

    raw_len, targets_len = random_spans_helper(inputs_length=128)   # 142, 30
    inputs, targets = corrupt(tokens_of_raw_len, rng, vocab_size)   # both end with EOS

The raw length is chosen as T5's `random_spans_helper` chooses it: the longest token chunk whose
corrupted inputs (non-noise tokens + one sentinel per span + EOS) still fit `inputs_length`, so a
full chunk fills the inputs exactly; `targets_length` is what its targets then need. The noise
mask alternates non-noise/noise spans starting with non-noise, span lengths drawn as a random
partition (T5's `random_spans_noise_mask`). Sentinel i is id vocab_size - 1 - i.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_jax.objectives.base import Seq2SeqObjective

EOS_ID, PAD_ID = 1, 0


@dataclasses.dataclass(frozen=True)
class SpanCorruption:
    noise_density: float = 0.15
    mean_noise_span_length: float = 3.0


DEFAULT_SPEC = SpanCorruption()


def _lengths_after_corruption(tokens: int, density: float, mean_span: float) -> tuple[int, int]:
    noise = int(round(tokens * density))
    spans = int(round(noise / mean_span))
    # inputs: the kept tokens, a sentinel per span and EOS; targets: the spans, a sentinel
    # before each, and EOS.
    return tokens - noise + spans + 1, noise + spans + 1


def random_spans_helper(
    inputs_length: int, noise_density: float = 0.15, mean_noise_span_length: float = 3.0
) -> tuple[int, int]:
    """(raw tokens per example, targets length) for corrupted inputs of `inputs_length`."""
    tokens = inputs_length - 1
    while _lengths_after_corruption(tokens + 1, noise_density, mean_noise_span_length)[0] <= (
        inputs_length
    ):
        tokens += 1
    _, targets = _lengths_after_corruption(tokens, noise_density, mean_noise_span_length)
    if noise_density == 0.5 and targets > inputs_length:  # T5 keeps targets = inputs here
        tokens -= 1
        targets -= 1
    return tokens, targets


def _random_partition(items: int, segments: int, rng: np.random.Generator) -> np.ndarray:
    """`segments` positive lengths summing to `items`, uniformly over the compositions."""
    first = np.zeros(items, bool)
    first[1:] = rng.permutation(np.arange(items - 1) < segments - 1)
    segment_id = np.cumsum(first)
    return np.bincount(segment_id, minlength=segments).astype(np.int64)


def noise_mask(length: int, rng: np.random.Generator, spec: SpanCorruption) -> np.ndarray:
    """Bool mask of `length`: round(length*density) noise tokens in round(noise/mean) spans."""
    noise = int(round(length * spec.noise_density))
    noise = min(max(noise, 1), length - 1)  # at least one token of each kind
    spans = max(int(round(noise / spec.mean_noise_span_length)), 1)
    noise_lens = _random_partition(noise, spans, rng)
    keep_lens = _random_partition(length - noise, spans, rng)
    interleaved = np.stack([keep_lens, noise_lens], axis=1).reshape(-1)
    starts = np.cumsum(interleaved)[:-1]
    span_start = np.zeros(length, bool)
    span_start[starts] = True
    return np.cumsum(span_start) % 2 == 1


def _sentinel_spans(tokens: np.ndarray, mask: np.ndarray, vocab_size: int) -> np.ndarray:
    """Each run of masked tokens -> one sentinel (counting down from vocab_size - 1); the rest
    kept."""
    prev = np.concatenate([[False], mask[:-1]])
    first = mask & ~prev
    sentinel = vocab_size - np.cumsum(first)
    out = np.where(first, sentinel, tokens)
    return out[~(mask & prev)]


def corrupt(
    tokens: np.ndarray, rng: np.random.Generator, vocab_size: int,
    spec: SpanCorruption = DEFAULT_SPEC,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(inputs, targets) of one chunk of tokens, each ending with EOS."""
    tokens = np.asarray(tokens, np.int64)
    mask = noise_mask(len(tokens), rng, spec)
    inputs = _sentinel_spans(tokens, mask, vocab_size)
    targets = _sentinel_spans(tokens, ~mask, vocab_size)
    return np.append(inputs, EOS_ID), np.append(targets, EOS_ID)


def pad_to(x: np.ndarray, length: int) -> np.ndarray:
    if len(x) > length:
        raise ValueError(f"sequence of {len(x)} does not fit {length}")
    return np.pad(x, (0, length - len(x)), constant_values=PAD_ID)


def _example(tokens: np.ndarray, rng: np.random.Generator, vocab_size: int):
    return corrupt(tokens, rng, vocab_size)


def _lengths(inputs_length: int) -> tuple[int, int]:
    return random_spans_helper(inputs_length)


OBJECTIVE = Seq2SeqObjective(
    name="span_corruption",
    description="T5 span corruption: 15% of the tokens in spans of mean length 3 -> sentinels",
    lengths=_lengths,
    make_example=_example,
    uses_sentinels=True,
    data_flag="span_corruption",
)
