"""Span-corruption data (T5): text -> T5 sentencepiece ids -> documents concatenated and cut into
chunks of the raw length `random_spans_helper` gives -> corrupted (inputs, targets) written as
TFRecord shards of `tf.train.Example` with int64 features `inputs` [inputs_length] and `targets`
[targets_length] (zero-padded), or kept as raw chunks for corruption at training time.
No JAX here, as the rest of the data pipeline."""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from bert_jax.objectives.span_corruption import DEFAULT_SPEC, SpanCorruption, corrupt, pad_to
from bert_jax.shards import example
from bert_jax.shards.schema import Feature, Schema
from bert_jax.shards.tfrecord import TFRecordWriter


def schema(inputs_length: int, targets_length: int) -> Schema:
    return (Feature("inputs", inputs_length, "int64"), Feature("targets", targets_length, "int64"))


def token_chunks(documents: Iterable[list[str]], encode, raw_length: int) -> np.ndarray:
    """[N, raw_length] ids: every document's sentences encoded (no EOS), documents concatenated
    (T5 packs across documents), cut into full chunks; the tail shorter than a chunk is dropped."""
    stream: list[int] = []
    for doc in documents:
        for sentence in doc:
            stream += encode(sentence)
    n = len(stream) // raw_length
    return np.asarray(stream[: n * raw_length], np.int64).reshape(n, raw_length)


def corrupt_batch(
    chunks_NxR: np.ndarray, rng: np.random.Generator, vocab_size: int, inputs_length: int,
    targets_length: int, spec: SpanCorruption = DEFAULT_SPEC,
) -> dict[str, np.ndarray]:  # fmt: skip
    inputs, targets = [], []
    for row in chunks_NxR:
        i, t = corrupt(row, rng, vocab_size, spec)
        inputs.append(pad_to(i, inputs_length))
        targets.append(pad_to(t, targets_length))
    return {"inputs": np.stack(inputs), "targets": np.stack(targets)}


def write_shard(
    path: str | os.PathLike, chunks_NxR: np.ndarray, vocab_size: int, inputs_length: int,
    targets_length: int, seed: int, spec: SpanCorruption = DEFAULT_SPEC,
) -> int:  # fmt: skip
    """Static corruption of every chunk into one TFRecord file; returns the record count."""
    columns = corrupt_batch(chunks_NxR, np.random.default_rng(seed), vocab_size, inputs_length,
                            targets_length, spec)  # fmt: skip
    with TFRecordWriter(path) as writer:
        for record in example.encode_batch(columns):
            writer.write(record)
        return writer.num_records
