"""T5's prefix language modelling (Raffel et al. 2020, §3.3.2; t5.data.preprocessors.prefix_lm
with `random_prefix_noise_mask`): each chunk of text is split at a point drawn uniformly from
[1, length - 1]; the inputs are the prefix, the targets the rest, each followed by EOS.

    inputs, targets = split(chunk, np.random.default_rng((seed, example_index)))

T5 cuts its chunks at inputs_length - 1 tokens (room for EOS); here a chunk is inputs_length
tokens, so that the longest prefix (length - 1 tokens + EOS) fills the inputs and the longest
rest fills targets of the same length. Numpy only, as span corruption.
"""

from __future__ import annotations

import numpy as np

from bert_jax.objectives.base import Seq2SeqObjective
from bert_jax.objectives.span_corruption import EOS_ID


def split_point(length: int, rng: np.random.Generator) -> int:
    """Tokens in the prefix: uniform in [1, length - 1], so neither side is empty."""
    if length < 2:
        raise ValueError(f"a chunk of {length} token(s) cannot be split into prefix and rest")
    return int(rng.integers(1, length))


def split(
    tokens: np.ndarray, rng: np.random.Generator, vocab_size: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(prefix + EOS, rest + EOS) of one chunk; `vocab_size` is unused (no sentinels)."""
    tokens = np.asarray(tokens, np.int64)
    k = split_point(len(tokens), rng)
    return np.append(tokens[:k], EOS_ID), np.append(tokens[k:], EOS_ID)


def lengths(inputs_length: int) -> tuple[int, int]:
    """(raw tokens per chunk, targets_length) for inputs of `inputs_length`."""
    return inputs_length, inputs_length


OBJECTIVE = Seq2SeqObjective(
    name="prefix_lm",
    description="T5 prefix LM: inputs = a random-length prefix, targets = the rest",
    lengths=lengths,
    make_example=split,
    uses_sentinels=False,
    data_flag="prefix_lm",
)
