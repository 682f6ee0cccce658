"""`PretrainInput`: the resumable training reader (API in bert_jax/input/__init__.py).

Grain graph per process: its files (Grain MapDataset, reshuffled every epoch, repeated) ->
`cycle_length` files read round-robin with CRC checks, window shuffle, batches of raw records
(stream.py) -> parse a batch at once (bert_jax.shards.example) -> step-indexed dynamic masking and
dtype casts (map_with_index) -> thread prefetch. Every stage has exact state, so `get_state()`
after any batch restores to exactly the next batch, prefetched batches included.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Sequence
from typing import Any

import grain
import jax
import numpy as np

from bert_jax.errors import BertJaxError
from bert_jax.input import batches, stream
from bert_jax.objectives.masking import MaskingSpec
from bert_jax.shards.example import decode_batch

_STATE_VERSION = 1


class PretrainInput(batches.Reader, grain.DatasetIterator):
    """Iterator of global training batches; see the package docstring for keys and shapes.

    A `grain.DatasetIterator`, so Grain's Orbax handler (`grain.checkpoint.CheckpointSave/
    CheckpointRestore`) saves and restores it as one JSON file per process.
    """

    _closed = True  # until grain's __init__ runs: a failed start-time check must not crash __del__

    def __init__(
        self,
        files: str | Sequence[str],
        global_batch_size: int,
        max_seq_length: int,
        max_predictions_per_seq: int,
        *,
        seed: int = 0,
        shuffle: bool = True,
        num_epochs: int | None = None,
        sharding: jax.sharding.NamedSharding | None = None,
        dynamic_masking: MaskingSpec | None = None,
        objective: str = "mlm_nsp",
        shuffle_window: int = 1000,
        cycle_length: int = 4,
        prefetch: int = 4,
        process_index: int | None = None,
        process_count: int | None = None,
        verify_crc: bool = True,
        vocab_size: int | None = None,
        pack_sequences: int = 1,
    ):
        if not 0 <= seed < 2**32:
            raise BertJaxError(f"seed must be in [0, 2**32), got {seed}")
        self._setup(
            files, global_batch_size, max_seq_length, max_predictions_per_seq, seed=seed,
            sharding=sharding, dynamic_masking=dynamic_masking, objective=objective,
            process_index=process_index, process_count=process_count, vocab_size=vocab_size,
            pack_sequences=pack_sequences,
        )  # fmt: skip
        self._fingerprint = {
            "files": files_fingerprint(self.files),
            "global_batch_size": global_batch_size,
            "process": [self.process_index, self.process_count],
            "seed": seed,
            "shuffle": [shuffle, shuffle_window, cycle_length],
            "num_epochs": num_epochs,
            "shapes": [max_seq_length, max_predictions_per_seq],
            "dynamic_masking": None if dynamic_masking is None else dynamic_masking.fingerprint(),
            "objective": self.objective.name,
        }
        if pack_sequences > 1:  # (absent from the states of runs before packing existed)
            self._fingerprint["pack_sequences"] = pack_sequences
        self._verify_crc = verify_crc
        self._dataset = self._build(shuffle, num_epochs, shuffle_window, cycle_length, prefetch)
        self._iterator = iter(self._dataset)
        super().__init__(self._iterator)  # start_prefetch / close reach the Grain iterator

    def _build(
        self,
        shuffle: bool,
        num_epochs: int | None,
        shuffle_window: int,
        cycle_length: int,
        prefetch: int,
    ) -> grain.IterDataset:
        ds = grain.MapDataset.source(self.files)
        if shuffle:  # reshuffled every epoch: the shuffle seed is offset by the epoch
            ds = ds.shuffle(seed=self.seed)
        files = ds.repeat(num_epochs)
        ds = stream.RecordBatchDataset(
            files,
            batch_size=self.batch_size,
            cycle_length=min(cycle_length, len(self.files)),
            window_size=shuffle_window,
            shuffle=shuffle,
            seed=self.seed,
            verify_crc=self._verify_crc,
        )
        ds = ds.map(functools.partial(decode_batch, schema=self._schema))
        ds = ds.map_with_index(self._finish)
        if prefetch > 0:
            ds = grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=prefetch)
        return ds

    def _finish(self, step: int, parsed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        first = step * self.global_batch_size + self.process_index * self.batch_size
        # A max/min over the batch: microseconds, and the only guard against a bad id in a record
        # whose CRC is right (written so, or from another vocab).
        batches.check_ids(parsed, self.vocab_size, self._where(step))
        return batches.finish_batch(
            parsed,
            self.objective,
            np.arange(first, first + self.batch_size, dtype=np.int64),
            self.dynamic_masking,
            self.max_predictions_per_seq,
            self.seed,
            pack_sequences=self.pack_sequences,
        )

    def _where(self, step: int) -> str:
        more = f" (or one of {len(self.files) - 1} more files)" if len(self.files) > 1 else ""
        return f"{self.files[0]}{more}: batch {step}"

    def __iter__(self) -> PretrainInput:
        return self

    def __next__(self) -> dict[str, Any]:
        return batches.to_global(next(self._iterator), self.sharding, self.global_batch_size)

    def get_state(self) -> dict[str, Any]:
        """JSON-serialisable position of this process's reader (after the last returned batch)."""
        return {
            "version": _STATE_VERSION,
            "config": self._fingerprint,
            "grain": self._iterator.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue exactly after the batch at which `state` was taken."""
        if state.get("version") != _STATE_VERSION:
            raise BertJaxError(f"input state version {state.get('version')}, expected 1")
        saved = dict(state["config"])
        if saved.get("files") == files_fingerprint_before_2026_11_30(self.files):
            saved["files"] = self._fingerprint["files"]  # the same files, saved by full paths
        for key, value in self._fingerprint.items():
            if saved.get(key) != value:
                raise BertJaxError(
                    f"input state was saved with {key}={saved.get(key)!r}, this run has "
                    f"{key}={value!r}; exact resume needs the same input settings"
                )
        self._iterator.set_state(state["grain"])


def files_fingerprint(files: list[str]) -> dict[str, object]:
    """Small, order-sensitive identity of a file list (state stays small with 10k shards): the
    files' paths below the directory they share, so the same shards reached by another path (a
    workdir moved or remade on another machine: bert_jax.ablations.units' carried runs) resume."""
    base = os.path.commonprefix(files).rpartition("/")[0]
    names = [f[len(base):].lstrip("/") for f in files]
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]
    return {"count": len(files), "first": names[0], "names_sha256": digest}


def files_fingerprint_before_2026_11_30(files: list[str]) -> dict[str, object]:
    """The identity states saved before 2026-11-30 hold: the full paths (a run resumed in
    another directory was refused)."""
    digest = hashlib.sha256("\n".join(files).encode()).hexdigest()[:16]
    return {"count": len(files), "first": files[0], "sha256": digest}
