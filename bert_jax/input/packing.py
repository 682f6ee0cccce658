"""Sequence packing for fine-tuning: several tokenized examples per row of max_seq_length.

    packed, packing = pack_arrays(featurised, max_sequences=8)   # rows R x L, slots R x S
    logits_NxC = unpack_sequences(logits_RxSxC, packing)          # back to example order

Packing happens here, in the input pipeline, after tokenization: a task featurises its examples
padded as always (`[CLS] A [SEP] B [SEP]`, segment ids 0/1 per example), then the rows are packed.
Pretraining packs earlier, in the data pipeline (create-pretraining-data --pack_sequences), with
the same row assignment and layout (`bert_jax.data.row_packing`).

A packed row holds examples back to back from slot 0, `pack_ids` numbers them 1..S (0 on padding:
`bert_jax.model.attention_core.AttentionMask.pack_BxL`), and each keeps its own segment ids. The
model restarts positions per example and keeps attention inside it, so every example's outputs
equal the padded ones.

Rows are assigned by best-fit decreasing (`bert_jax.data.row_packing`, which packed pretraining
shards use too): examples longest first (ties by index), each into the
open row whose free space fits it most tightly, a new row when none does; a row closes at
`max_sequences` examples. It is deterministic (a function of the lengths alone) and wastes little:
first-fit/best-fit decreasing need at most 11/9 of the optimal number of rows, where greedy packing
in dataset order leaves each row's tail empty whenever the next example does not fit. Fine-tuning
loses nothing by the reordering: training shuffles rows, and predictions map back through
`example_index`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_jax.data.row_packing import assign_rows, place_rows
from bert_jax.errors import BertJaxError

__all__ = ["Packing", "assign_rows", "example_lengths", "pack_arrays", "unpack_sequences",
           "unpack_tokens"]  # fmt: skip

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


@dataclasses.dataclass(frozen=True)
class Packing:
    """Where every example went: `example_index` R x S (-1 in an empty slot)."""

    example_index: np.ndarray
    lengths: np.ndarray  # N real tokens per example
    max_seq_length: int

    @property
    def present(self) -> np.ndarray:
        return self.example_index >= 0

    @property
    def num_rows(self) -> int:
        return len(self.example_index)

    @property
    def efficiency(self) -> float:
        """Real tokens / token slots of the packed rows."""
        return float(self.lengths.sum()) / max(self.num_rows * self.max_seq_length, 1)

    @property
    def padded_efficiency(self) -> float:
        """Real tokens / token slots with one example per row."""
        return float(self.lengths.sum()) / max(len(self.lengths) * self.max_seq_length, 1)

    def stats(self) -> dict[str, float]:
        return {
            "examples": len(self.lengths),
            "rows": self.num_rows,
            "examples_per_row": len(self.lengths) / max(self.num_rows, 1),
            "efficiency": self.efficiency,
            "padded_efficiency": self.padded_efficiency,
        }


def example_lengths(input_mask_NxL: np.ndarray) -> np.ndarray:
    """Real tokens per example; the mask must be a prefix (right padding) with >= 1 token."""
    lengths_N = input_mask_NxL.astype(bool).sum(-1)
    slot_1xL = np.arange(input_mask_NxL.shape[-1])[None, :]
    prefix = (input_mask_NxL.astype(bool) == (slot_1xL < lengths_N[:, None])).all(-1)
    if not prefix.all() or not lengths_N.all():
        bad = int(np.flatnonzero(~prefix | (lengths_N == 0))[0])
        raise BertJaxError(
            f"input_mask row {bad}: packing needs right-padded examples with at least one token"
        )
    return lengths_N


def pack_arrays(
    arrays: dict[str, np.ndarray],
    max_sequences: int,
    token_keys: tuple[str, ...] = INPUT_KEYS,
) -> tuple[dict[str, np.ndarray], Packing]:
    """Padded per-example arrays (N x L for `token_keys`, N x ... for the rest, e.g. labels) ->
    packed rows: `token_keys` R x L, `pack_ids` R x L, the other columns R x S x ... (zeros in
    an empty slot), `present` R x S and `example_index` R x S."""
    for key in INPUT_KEYS:
        if key not in arrays:
            raise BertJaxError(f"pack_arrays: no {key!r} column (have {sorted(arrays)})")
    seq_len = arrays["input_ids"].shape[-1]
    lengths_N = example_lengths(arrays["input_mask"])
    rows = assign_rows(lengths_N, seq_len, max_sequences)
    index_RxS = np.full((len(rows), max_sequences), -1, np.int64)
    for r, row in enumerate(rows):
        index_RxS[r, : len(row)] = row
    packing = Packing(index_RxS, lengths_N, seq_len)
    out, out["pack_ids"] = place_rows(rows, lengths_N, {k: arrays[k] for k in token_keys})
    for k, v in arrays.items():
        if k not in token_keys:
            out[k] = np.where(
                _expand(index_RxS >= 0, v.ndim - 1), v[np.maximum(index_RxS, 0)], 0
            ).astype(v.dtype)
    out["present"] = packing.present
    out["example_index"] = index_RxS
    return out, packing


def unpack_sequences(out_RxSx: np.ndarray, packing: Packing) -> np.ndarray:
    """Per-slot outputs (R x S x ...) -> per-example outputs (N x ...) in example order."""
    present = packing.present
    result = np.zeros((len(packing.lengths), *out_RxSx.shape[2:]), out_RxSx.dtype)
    result[packing.example_index[present]] = out_RxSx[: packing.num_rows][present]
    return result


def unpack_tokens(out_RxLx: np.ndarray, packing: Packing) -> np.ndarray:
    """Per-token outputs of packed rows (R x L x ...) -> padded per-example ones (N x L x ...),
    zeros past each example's length."""
    result = np.zeros((len(packing.lengths), *out_RxLx.shape[1:]), out_RxLx.dtype)
    for r, row in enumerate(packing.example_index):
        start = 0
        for i in row[row >= 0]:
            end = start + int(packing.lengths[i])
            result[i, : end - start] = out_RxLx[r, start:end]
            start = end
    return result


def _expand(mask: np.ndarray, extra_dims: int) -> np.ndarray:
    return mask.reshape(*mask.shape, *([1] * extra_dims))
