"""Which sequences share a row (best-fit decreasing on their lengths) and their tokens laid
out back to back there, shared by packed pretraining shards (bert_jax.data.batch,
--pack_sequences) and packed fine-tuning rows (bert_jax.input.packing). JAX-free, so Beam
workers import it cheaply."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bert_jax.errors import BertJaxError


def assign_rows(lengths: Sequence[int], max_seq_length: int, max_sequences: int) -> list[list[int]]:
    """Best-fit decreasing: the example indices of every row, in index order within a row."""
    if max_sequences < 1:
        raise BertJaxError(f"max_sequences {max_sequences}: must be at least 1")
    rows: list[list[int]] = []
    open_by_free: list[list[int]] = [[] for _ in range(max_seq_length + 1)]  # free -> rows
    for i in sorted(range(len(lengths)), key=lambda i: (-int(lengths[i]), i)):
        need = int(lengths[i])
        fit = next((f for f in range(need, max_seq_length + 1) if open_by_free[f]), None)
        if fit is None:
            row, fit = len(rows), max_seq_length
            rows.append([])
        else:
            row = open_by_free[fit].pop()
        rows[row].append(i)
        if len(rows[row]) < max_sequences and fit > need:
            open_by_free[fit - need].append(row)
    return [sorted(r) for r in rows]


def place_rows(
    rows: list[list[int]], lengths_N: np.ndarray, arrays: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-sequence token arrays (N x L, right-padded) -> rows (R x L) holding each row's
    sequences back to back from slot 0, and `pack_ids` R x L (1, 2, ... per sequence, 0 on
    padding)."""
    n_rows, seq_len = len(rows), next(iter(arrays.values())).shape[-1]
    out = {k: np.zeros((n_rows, seq_len), v.dtype) for k, v in arrays.items()}
    pack_ids = np.zeros((n_rows, seq_len), np.int32)
    for r, row in enumerate(rows):
        start = 0
        for slot, i in enumerate(row):
            end = start + int(lengths_N[i])
            for k, v in arrays.items():
                out[k][r, start:end] = v[i, : end - start]
            pack_ids[r, start:end] = slot + 1
            start = end
    return out, pack_ids
