"""Batches of (inputs, targets) for encoder-decoder training, held in memory (CPU-scale corpora
and fine-tuning sets): from span-corruption TFRecord shards, from raw token chunks corrupted
afresh every epoch (dynamic corruption, the same function the shards were written with), or from
given arrays (text-to-text tasks). Resumable: the state is (epoch, position); an epoch's order
and its corruption depend only on (seed, epoch), so a resumed run sees the same batches."""

from __future__ import annotations

from typing import Any

import numpy as np

from bert_jax.data.span_corruption import corrupt_batch, schema
from bert_jax.errors import BertJaxError
from bert_jax.objectives.span_corruption import DEFAULT_SPEC, SpanCorruption
from bert_jax.shards import example
from bert_jax.shards.tfrecord import read_records


def read_shards(files: list[str], inputs_length: int, targets_length: int) -> dict[str, np.ndarray]:
    records = [r for f in files for r in read_records(f)]
    if not records:
        raise BertJaxError(f"{', '.join(map(str, files))}: no records")
    return example.decode_batch(records, schema(inputs_length, targets_length))


class Seq2SeqBatches:
    def __init__(
        self,
        batch_size: int,
        seed: int = 0,
        arrays: dict[str, np.ndarray] | None = None,
        chunks: np.ndarray | None = None,
        vocab_size: int = 0,
        lengths: tuple[int, int] = (0, 0),
        spec: SpanCorruption = DEFAULT_SPEC,
    ) -> None:
        if (arrays is None) == (chunks is None):
            raise ValueError("give exactly one of arrays (static) or chunks (dynamic corruption)")
        self.batch_size, self.seed = batch_size, seed
        self.arrays, self.chunks = arrays, chunks
        self.vocab_size, self.lengths, self.spec = vocab_size, lengths, spec
        self.n = len(chunks) if chunks is not None else len(arrays["inputs"])
        if self.n < batch_size:
            raise BertJaxError(f"{self.n} examples, fewer than one batch of {batch_size}")
        self.epoch, self.pos = 0, 0

    def __iter__(self) -> Seq2SeqBatches:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        if self.pos + self.batch_size > self.n:
            self.epoch, self.pos = self.epoch + 1, 0
        order = np.random.default_rng((self.seed, self.epoch)).permutation(self.n)
        idx = order[self.pos : self.pos + self.batch_size]
        if self.chunks is not None:
            rng = np.random.default_rng((self.seed, self.epoch, self.pos))
            batch = corrupt_batch(self.chunks[idx], rng, self.vocab_size, *self.lengths,
                                  spec=self.spec)  # fmt: skip
        else:
            batch = {k: v[idx] for k, v in self.arrays.items()}
        self.pos += self.batch_size
        return {k: np.asarray(v, np.int32) for k, v in batch.items()}

    def get_state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "pos": self.pos}

    def set_state(self, state: dict[str, Any]) -> None:
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])
