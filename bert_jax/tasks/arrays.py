"""In-memory arrays -> batches: a resumable shuffled training iterator, padded eval batches.

    it = TrainBatches(arrays, batch_size, seed)      # endless; get_state()/set_state() resume
    for batch, num_real in eval_batches(arrays, batch_size): ...

Fine-tuning sets fit in host memory once featurised (MNLI at 128 tokens is ~0.6 GB of int32), so
the training iterator is a permutation per epoch (seeded by seed + epoch) over the arrays; its
state is (epoch, position), JSON-able for the checkpoint, and restoring it resumes exactly.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


class TrainBatches:
    def __init__(self, arrays: dict[str, np.ndarray], batch_size: int, seed: int) -> None:
        self.arrays = arrays
        self.batch_size = batch_size
        self.seed = seed
        self.n = len(next(iter(arrays.values())))
        if self.n < batch_size:
            # Tiny sets: repeat so that one batch exists (drop_remainder otherwise yields none).
            reps = -(-batch_size // self.n)
            self.arrays = {k: np.concatenate([v] * reps) for k, v in arrays.items()}
            self.n = len(next(iter(self.arrays.values())))
        self.epoch = 0
        self.position = 0
        self._perm = self._permutation()

    def _permutation(self) -> np.ndarray:
        return np.random.default_rng(self.seed + self.epoch).permutation(self.n)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        if self.position + self.batch_size > self.n:  # drop the remainder, as the reference
            self.epoch += 1
            self.position = 0
            self._perm = self._permutation()
        idx = self._perm[self.position : self.position + self.batch_size]
        self.position += self.batch_size
        return {k: v[idx] for k, v in self.arrays.items()}

    def get_state(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def set_state(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._perm = self._permutation()


def eval_batches(
    arrays: dict[str, np.ndarray], batch_size: int
) -> Iterator[tuple[dict[str, np.ndarray], int]]:
    """Fixed-size batches in order; the last one zero-padded. Yields (batch, number real)."""
    n = len(next(iter(arrays.values())))
    for start in range(0, n, batch_size):
        chunk = {k: v[start : start + batch_size] for k, v in arrays.items()}
        real = len(next(iter(chunk.values())))
        if real < batch_size:
            chunk = {
                k: np.concatenate([v, np.zeros((batch_size - real, *v.shape[1:]), v.dtype)])
                for k, v in chunk.items()
            }
        yield chunk, real
