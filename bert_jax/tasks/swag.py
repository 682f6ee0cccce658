"""SWAG multiple choice: the dataset's CSV files (train.csv, val.csv, test.csv), 4 endings each.

Columns are found by header name (`sent1`, `sent2`, `ending0`..`ending3`, `label`; the files also
carry video-id, fold-ind, startphrase, gold-source). Each choice is the pair
(`sent1`, `sent2 + " " + ending_i`), truncated longest-first to `max_seq_length - 3` pieces, as
in the BERT paper's SWAG setup. A missing column or a label outside 0..3 is an error naming the
file and line.
"""

from __future__ import annotations

import csv
import dataclasses
import io

import numpy as np

from bert_jax.errors import BertJaxError
from bert_jax.tasks.text_files import read_utf8
from bert_jax.tasks.text_pairs import Tokenizer, encode_text_pair

NUM_CHOICES = 4


@dataclasses.dataclass(frozen=True)
class SwagExample:
    swag_id: str
    context: str
    start_ending: str
    endings: tuple[str, ...]
    label: int | None


def read_swag(path: str, has_label: bool = True) -> list[SwagExample]:
    text = read_utf8(path)  # local or gs://
    needed = ["sent1", "sent2", *(f"ending{i}" for i in range(NUM_CHOICES))]
    needed += ["label"] if has_label else []
    out = []
    with io.StringIO(text, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in needed if c not in (reader.fieldnames or [])]
        if missing:
            raise BertJaxError(f"{path}: line 1: header lacks column(s) {missing}")
        for row in reader:
            lineno = reader.line_num
            if any(row.get(c) is None for c in needed):
                raise BertJaxError(f"{path}: line {lineno}: too few columns")
            label = None
            if has_label:
                raw = row["label"].strip()
                if raw not in {str(i) for i in range(NUM_CHOICES)}:
                    raise BertJaxError(f"{path}: line {lineno}: label {raw!r} not in 0..3")
                label = int(raw)
            endings = tuple(row[f"ending{i}"] for i in range(NUM_CHOICES))
            swag_id = row.get("") or row.get("video-id") or str(len(out))
            out.append(SwagExample(swag_id, row["sent1"], row["sent2"], endings, label))
    return out


def featurize(
    examples: list[SwagExample], tokenizer: Tokenizer, max_seq_length: int
) -> dict[str, np.ndarray]:
    n, c, length = len(examples), NUM_CHOICES, max_seq_length
    arrays = {k: np.zeros((n, c, length), np.int32) for k in ("input_ids", "input_mask")}
    arrays["segment_ids"] = np.zeros((n, c, length), np.int32)
    arrays["labels"] = np.zeros(n, np.int32)
    for i, ex in enumerate(examples):
        for j, ending in enumerate(ex.endings):
            b = f"{ex.start_ending} {ending}".strip()
            ids, mask, seg = encode_text_pair(tokenizer, ex.context, b, length)
            arrays["input_ids"][i, j], arrays["input_mask"][i, j] = ids, mask
            arrays["segment_ids"][i, j] = seg
        arrays["labels"][i] = ex.label or 0
    return arrays
