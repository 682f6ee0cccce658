"""Interleaved, window-shuffled batches of raw records from a sequence of files, as one Grain
`IterDataset` stage with exact state.

Grain's InterleaveIterDataset + WindowShuffleIterDataset do the same job, but their per-record
overhead (a prefetch thread per file, a hash per shuffled element) caps them near 5k records/s on
one core; this stage reads ~40x faster and still checkpoints exactly.

Order: `cycle_length` files are open at once and read round-robin, one record each; a file that
ends is replaced by the next file of `files` (which may be an endless, per-epoch reshuffled Grain
MapDataset). Records fill a window of `window_size` that is permuted with a generator seeded by
(seed, window index). Batches of `batch_size` are cut from the window stream; the last partial
batch is dropped.

Files are read by `bert_jax.shards.tfrecord.RecordReader`, which checks both CRCs of every record
(unless `verify_crc=False`) and whose byte offset is each open file's saved state.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import grain
import numpy as np

from bert_jax.shards.tfrecord import RecordReader


class _ReadersState:
    """Which files are open (index into `files`, byte offset) and whose turn it is."""

    def __init__(self, files: Sequence[str], cycle_length: int, verify_crc: bool):
        self.files = files
        self.cycle_length = cycle_length
        self.verify_crc = verify_crc
        self.next_file = 0
        self.slots: list[list[int] | None] = [None] * cycle_length
        self.turn = 0
        self._open: list[RecordReader | None] = [None] * cycle_length

    def state(self) -> dict[str, Any]:
        slots = [
            None if s is None else [s[0], self._open[i].offset]
            for i, s in enumerate(self.slots)
        ]
        return {"next_file": self.next_file, "slots": slots, "turn": self.turn}

    def restore(self, state: dict[str, Any]) -> None:
        self.close()
        self.next_file = state["next_file"]
        self.turn = state["turn"]
        self.slots = [None if s is None else list(s) for s in state["slots"]]
        for i, slot in enumerate(self.slots):
            if slot is not None:
                self._open[i] = self._reader(slot[0], offset=slot[1])

    def _refill(self, i: int) -> bool:
        if self.next_file >= len(self.files):
            self.slots[i] = None
            return False
        self.slots[i] = [self.next_file, 0]
        self._open[i] = self._reader(self.next_file)
        self.next_file += 1
        return True

    def _reader(self, file_index: int, offset: int = 0) -> RecordReader:
        # Records of one file interleave with other files' records: small chunks keep
        # cycle_length open files from holding much memory.
        path = self.files[file_index]
        return RecordReader(path, offset, verify=self.verify_crc, chunk_bytes=1 << 18)

    def started(self) -> None:
        """Open the first cycle_length files (on a fresh reader only)."""
        for i in range(self.cycle_length):
            self._refill(i)

    def next_record(self) -> bytes | None:
        """One record from the file whose turn it is; None once every file is exhausted."""
        idle = 0  # consecutive slots with no file left
        while idle < self.cycle_length:
            i = self.turn
            reader = self._open[i]
            if reader is None:
                self.turn = (i + 1) % self.cycle_length
                idle += 1
                continue
            record = next(reader, None)
            if record is not None:
                self.turn = (i + 1) % self.cycle_length
                return record
            reader.close()
            self._open[i] = None
            self._refill(i)  # the next file takes this slot (and this turn)
        return None

    def close(self) -> None:
        for i, reader in enumerate(self._open):
            if reader is not None:
                reader.close()
            self._open[i] = None


class _RecordBatchIterator(grain.DatasetIterator):
    def __init__(self, ds: RecordBatchDataset):
        super().__init__()
        self._ds = ds
        self._readers = _ReadersState(ds.files, ds.cycle_length, ds.verify_crc)
        self._readers.started()
        self._window_start = self._readers.state()
        self._window_index = 0
        self._pos_in_window = 0
        self._window: list[bytes] = []
        self._exhausted = False

    def _fill_window(self) -> None:
        self._window_start = self._readers.state()
        records = []
        while len(records) < self._ds.window_size:
            record = self._readers.next_record()
            if record is None:
                self._exhausted = True
                break
            records.append(record)
        if self._ds.shuffle and len(records) > 1:
            rng = np.random.default_rng([self._ds.seed, self._window_index])
            records = [records[j] for j in rng.permutation(len(records))]
        self._window = records
        self._pos_in_window = 0

    def _next_record(self) -> bytes | None:
        if self._pos_in_window >= len(self._window):
            if self._exhausted:
                return None
            if self._window:
                self._window_index += 1
            self._fill_window()
            if not self._window:
                return None
        record = self._window[self._pos_in_window]
        self._pos_in_window += 1
        return record

    def __next__(self) -> list[bytes]:
        batch = []
        for _ in range(self._ds.batch_size):
            record = self._next_record()
            if record is None:
                raise StopIteration  # drop the last partial batch
            batch.append(record)
        return batch

    def get_state(self) -> dict[str, Any]:
        return {
            "window_start": copy.deepcopy(self._window_start),
            "window_index": self._window_index,
            "pos_in_window": self._pos_in_window,
            "window_filled": bool(self._window),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._readers.restore(state["window_start"])
        self._window_index = state["window_index"]
        self._exhausted = False
        self._window = []
        self._pos_in_window = 0
        if state["window_filled"]:
            self._fill_window()
            self._pos_in_window = state["pos_in_window"]
        else:
            self._window_start = copy.deepcopy(state["window_start"])

    def close(self) -> None:
        self._readers.close()


class RecordBatchDataset(grain.IterDataset):
    """Lists of `batch_size` raw records; see the module docstring for the order."""

    def __init__(
        self,
        files: Sequence[str],
        *,
        batch_size: int,
        cycle_length: int,
        window_size: int,
        shuffle: bool,
        seed: int,
        verify_crc: bool = True,
    ):
        super().__init__()
        self.files = files
        self.verify_crc = verify_crc
        self.batch_size = batch_size
        self.cycle_length = max(1, cycle_length)
        self.window_size = max(1, window_size) if shuffle else max(1, batch_size)
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> _RecordBatchIterator:
        return _RecordBatchIterator(self)

    def __str__(self) -> str:
        return f"RecordBatchDataset(cycle_length={self.cycle_length}, window={self.window_size})"
