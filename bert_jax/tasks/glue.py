"""GLUE: processors for the standard download layout, featurisation, metrics, submission TSVs.

Files are `<data_dir>/{train,dev,test}.tsv` (MNLI: `dev_matched`, `dev_mismatched`,
`test_matched`, `test_mismatched`), read as the reference does: tab-separated, no quoting. Column
positions and headers follow the GLUE files (and google-research/bert's processors where it has
one). A row with too few columns or a label outside the task's label set is an error naming the
file and line; nothing is skipped silently.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import sys

import numpy as np
from scipy import stats
from sklearn import metrics as skm

from bert_jax.atomic_write import write_text_atomic
from bert_jax.errors import BertJaxError
from bert_jax.tasks.text_files import read_utf8
from bert_jax.tasks.text_pairs import Tokenizer, encode_text_pair

csv.field_size_limit(sys.maxsize)  # QQP/MNLI have long fields


@dataclasses.dataclass(frozen=True)
class Example:
    guid: str  # "<split>-<row index or id>"; the test index goes into the submission file
    text_a: str
    text_b: str | None
    label: str | float | None  # None on test rows (GLUE hides test labels)


@dataclasses.dataclass(frozen=True)
class Columns:
    a: int
    b: int | None
    label: int | None  # None: no label column (test)
    index: int | None  # column holding the test id; None: the row number
    header: bool


@dataclasses.dataclass(frozen=True)
class GlueSpec:
    """What differs between GLUE tasks: labels, file columns, splits, submission and tfds names."""

    name: str
    labels: tuple[str, ...]  # () for regression
    train_dev: Columns
    test: Columns
    dev_splits: tuple[str, ...] = ("dev",)
    test_splits: tuple[str, ...] = ("test",)
    submission: tuple[str, ...] = ()  # GLUE server file name per test split
    tfds_name: str = ""
    tfds_text: tuple[str, str | None] = ("sentence", None)
    tfds_dev: tuple[str, ...] = ("validation",)

    @property
    def is_regression(self) -> bool:
        return not self.labels

    @property
    def num_labels(self) -> int:
        return max(1, len(self.labels))


_BIN = ("0", "1")
_NLI2 = ("entailment", "not_entailment")
TASKS: dict[str, GlueSpec] = {
    t.name: t
    for t in [
        GlueSpec(
            "cola", _BIN, Columns(3, None, 1, None, False), Columns(1, None, None, 0, True),
            submission=("CoLA.tsv",), tfds_name="glue/cola",
        ),
        GlueSpec(
            "sst2", _BIN, Columns(0, None, 1, None, True), Columns(1, None, None, 0, True),
            submission=("SST-2.tsv",), tfds_name="glue/sst2",
        ),
        GlueSpec(
            "mrpc", _BIN, Columns(3, 4, 0, None, True), Columns(3, 4, None, 0, True),
            submission=("MRPC.tsv",), tfds_name="glue/mrpc",
            tfds_text=("sentence1", "sentence2"),
        ),
        GlueSpec(
            "stsb", (), Columns(7, 8, -1, None, True), Columns(7, 8, None, 0, True),
            submission=("STS-B.tsv",), tfds_name="glue/stsb",
            tfds_text=("sentence1", "sentence2"),
        ),
        GlueSpec(
            "qqp", _BIN, Columns(3, 4, 5, 0, True), Columns(1, 2, None, 0, True),
            submission=("QQP.tsv",), tfds_name="glue/qqp",
            tfds_text=("question1", "question2"),
        ),
        GlueSpec(
            "mnli", ("contradiction", "entailment", "neutral"),
            Columns(8, 9, -1, None, True), Columns(8, 9, None, 0, True),
            dev_splits=("dev_matched", "dev_mismatched"),
            test_splits=("test_matched", "test_mismatched"),
            submission=("MNLI-m.tsv", "MNLI-mm.tsv"), tfds_name="glue/mnli",
            tfds_text=("premise", "hypothesis"),
            tfds_dev=("validation_matched", "validation_mismatched"),
        ),
        GlueSpec(
            "qnli", _NLI2, Columns(1, 2, -1, None, True), Columns(1, 2, None, 0, True),
            submission=("QNLI.tsv",), tfds_name="glue/qnli", tfds_text=("question", "sentence"),
        ),
        GlueSpec(
            "rte", _NLI2, Columns(1, 2, -1, None, True), Columns(1, 2, None, 0, True),
            submission=("RTE.tsv",), tfds_name="glue/rte", tfds_text=("sentence1", "sentence2"),
        ),
        GlueSpec(
            "wnli", _BIN, Columns(1, 2, -1, None, True), Columns(1, 2, None, 0, True),
            submission=("WNLI.tsv",), tfds_name="glue/wnli",
            tfds_text=("sentence1", "sentence2"),
        ),
    ]
}  # fmt: skip
ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "mnli-m": "mnli"}


def get_spec(name: str) -> GlueSpec:
    key = ALIASES.get(name.lower(), name.lower())
    if key not in TASKS:
        raise BertJaxError(f"GLUE task {name!r} unknown; use one of {sorted(TASKS)}")
    return TASKS[key]


# ---- reading ------------------------------------------------------------------------------------
def read_tsv(path: str) -> list[list[str]]:
    decoded = read_utf8(path)  # local or gs://
    return list(csv.reader(io.StringIO(decoded, newline=""), delimiter="\t", quotechar=None))


def read_split(spec: GlueSpec, data_dir: str, split: str) -> list[Example]:
    """Examples of `<data_dir>/<split>.tsv`; split is train, dev*, or test*."""
    path = os.path.join(data_dir, f"{split}.tsv")
    is_test = split.startswith("test")
    cols = spec.test if is_test else spec.train_dev
    needed = max(c for c in (cols.a, cols.b, cols.index, cols.label) if c is not None and c >= 0)
    examples = []
    for lineno, row in enumerate(read_tsv(path), start=1):
        if cols.header and lineno == 1:
            continue
        if len(row) <= needed or (cols.label == -1 and len(row) < 2):
            raise BertJaxError(
                f"{path}: line {lineno}: expected at least {needed + 1} tab-separated columns "
                f"for {spec.name} {split}, got {len(row)}"
            )
        guid_id = row[cols.index] if cols.index is not None else str(lineno - 1 - cols.header)
        label: str | float | None = None
        if not is_test:
            raw = row[cols.label].strip()
            if spec.is_regression:
                try:
                    label = float(raw)
                except ValueError:
                    raise BertJaxError(
                        f"{path}: line {lineno}: label {raw!r} is not a number ({spec.name})"
                    ) from None
            elif raw not in spec.labels:
                raise BertJaxError(
                    f"{path}: line {lineno}: label {raw!r} not in {spec.name}'s label set "
                    f"{list(spec.labels)}"
                )
            else:
                label = raw
        text_b = row[cols.b] if cols.b is not None else None
        examples.append(Example(f"{split}-{guid_id}", row[cols.a], text_b, label))
    if not examples:  # an empty or header-only file: nothing to train on or to score
        raise BertJaxError(f"{path}: no examples (the file is empty or holds only a header)")
    return examples


def read_tfds_split(spec: GlueSpec, split: str, data_dir: str | None = None) -> list[Example]:
    """Examples from tfds `glue/<task>` (prepared data); tfds label ids map to our label names."""
    import tensorflow_datasets as tfds

    ds, info = tfds.load(spec.tfds_name, split=split, data_dir=data_dir, with_info=True)
    names = None if spec.is_regression else info.features["label"].names
    ka, kb = spec.tfds_text
    out = []
    for ex in tfds.as_numpy(ds):
        raw = ex["label"]
        label: str | float | None
        if spec.is_regression:
            label = float(raw) if not split.startswith("test") else None
        elif int(raw) < 0:
            label = None
        else:
            name = names[int(raw)]
            # tfds names binary classes (e.g. "acceptable"); GLUE files use "0"/"1" by position.
            label = name if name in spec.labels else spec.labels[int(raw)]
        a = ex[ka].decode("utf-8")
        b = ex[kb].decode("utf-8") if kb else None
        out.append(Example(f"{split}-{int(ex['idx'])}", a, b, label))
    return out


# ---- features -----------------------------------------------------------------------------------
def featurize(
    spec: GlueSpec, examples: list[Example], tokenizer: Tokenizer, max_seq_length: int
) -> dict[str, np.ndarray]:
    n = len(examples)
    ids = np.zeros((n, max_seq_length), np.int32)
    mask = np.zeros_like(ids)
    seg = np.zeros_like(ids)
    labels = np.zeros(n, np.float32 if spec.is_regression else np.int32)
    for i, ex in enumerate(examples):
        ids[i], mask[i], seg[i] = encode_text_pair(tokenizer, ex.text_a, ex.text_b, max_seq_length)
        if ex.label is not None:
            labels[i] = ex.label if spec.is_regression else spec.labels.index(ex.label)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": seg, "labels": labels}


# ---- metrics ------------------------------------------------------------------------------------
def compute_metrics(spec: GlueSpec, preds: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """preds: class ids (classification) or scores (regression); the benchmark's metrics."""
    if spec.is_regression:
        return {
            "pearson": float(stats.pearsonr(preds, labels)[0]),
            "spearmanr": float(stats.spearmanr(preds, labels)[0]),
        }
    out = {"accuracy": float(skm.accuracy_score(labels, preds))}
    if spec.name == "cola":
        out["mcc"] = float(skm.matthews_corrcoef(labels, preds))
    if spec.name in ("mrpc", "qqp"):
        out["f1"] = float(skm.f1_score(labels, preds, pos_label=1, zero_division=0.0))
    return out


def headline(spec: GlueSpec, m: dict[str, float]) -> float:
    """The one number GLUE averages for the task (two-metric tasks: their mean)."""
    if spec.is_regression:
        return (m["pearson"] + m["spearmanr"]) / 2
    if spec.name == "cola":
        return m["mcc"]
    if spec.name in ("mrpc", "qqp"):
        return (m["f1"] + m["accuracy"]) / 2
    return m["accuracy"]


def write_submission(spec: GlueSpec, examples: list[Example], preds: np.ndarray, path: str) -> None:
    """GLUE server format: header `index<TAB>prediction`, label names (or scores for STS-B)."""
    lines = ["index\tprediction"]
    for ex, p in zip(examples, preds, strict=True):
        idx = ex.guid.split("-", 1)[1]
        value = f"{float(p):.3f}" if spec.is_regression else spec.labels[int(p)]
        lines.append(f"{idx}\t{value}")
    write_text_atomic(path, "".join(line + "\n" for line in lines))
