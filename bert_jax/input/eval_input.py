"""`EvalInput`: one ordered pass over held-out shards, padded so no example is dropped.

Each process reads its files (`files[process_index::process_count]`; fewer files than processes
is fine here: a process without files yields only padding) in order. Every process
yields the same number of batches, ceil(max records of any process / per-process batch), padding
with all-zero rows whose `example_mask` and `masked_lm_weights` are 0, so a multi-host eval loop
never waits on a process that has run out of data. Iterating again starts a fresh pass.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np

from bert_jax.input import batches
from bert_jax.objectives.masking import MaskingSpec
from bert_jax.shards.example import decode_batch
from bert_jax.shards.tfrecord import count_records, read_records


class EvalInput(batches.Reader):
    """Iterable of global eval batches (see the package docstring for keys and shapes)."""

    def __init__(
        self,
        files: str | Sequence[str],
        global_batch_size: int,
        max_seq_length: int,
        max_predictions_per_seq: int,
        *,
        sharding: jax.sharding.NamedSharding | None = None,
        dynamic_masking: MaskingSpec | None = None,
        objective: str = "mlm_nsp",
        seed: int = 0,
        process_index: int | None = None,
        process_count: int | None = None,
        vocab_size: int | None = None,
        pack_sequences: int = 1,
    ):
        all_files = self._setup(
            files, global_batch_size, max_seq_length, max_predictions_per_seq, seed=seed,
            sharding=sharding, dynamic_masking=dynamic_masking, objective=objective,
            process_index=process_index, process_count=process_count, vocab_size=vocab_size,
            pack_sequences=pack_sequences, allow_idle=True,  # a process may get only padding
        )  # fmt: skip
        # Every process counts every file (headers only) to agree on the number of batches.
        counts = [count_records(f) for f in all_files]
        per_process = [sum(counts[i :: self.process_count]) for i in range(self.process_count)]
        self.num_examples = per_process[self.process_index]
        self.num_batches = math.ceil(max(per_process) / self.batch_size)

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self) -> Iterator[dict[str, Any]]:
        stream = itertools.chain.from_iterable(read_records(f) for f in self.files)
        for step in range(self.num_batches):
            chunk = list(itertools.islice(stream, self.batch_size))
            yield batches.to_global(self._batch(step, chunk), self.sharding, self.global_batch_size)

    def _batch(self, step: int, chunk: list[bytes]) -> dict[str, np.ndarray]:
        n, size = len(chunk), self.batch_size
        parsed = decode_batch(chunk, self._schema) if n else None
        padded = {}
        for f in self._schema:
            value = np.zeros((size, f.length), np.float32 if f.dtype == "float32" else np.int64)
            if parsed is not None:
                value[:n] = parsed[f.name]
            padded[f.name] = value
        where = f"{self.files[0]}..." if self.files else "eval input (no files on this process)"
        batches.check_ids(padded, self.vocab_size, f"{where}: eval batch {step}")
        first = step * self.global_batch_size + self.process_index * size
        return batches.finish_batch(
            padded,
            self.objective,
            np.arange(first, first + size, dtype=np.int64),
            self.dynamic_masking,
            self.max_predictions_per_seq,
            self.seed,
            pack_sequences=self.pack_sequences,
            example_mask_B=(np.arange(size) < n),
        )
