"""The teacher-label cache on disk: TFRecord shards of `tf.train.Example`, one per training row,
with the teacher's tokenization (`input_ids`, `input_mask`, `segment_ids`, as the fine-tuning
features), its outputs as float `teacher_logits`, and the hard labels where the row has one.

    glue   labels [1] (int64; float32 for regression), teacher_logits [C]
    ner    labels [L], label_weights [L] (1 on a word's first piece), teacher_logits [L x C]
    squad  start_positions [1], end_positions [1], teacher_logits [2 x L] (start, then end)

`has_label` [1] is 1 on the task's own training rows and 0 on transfer text (whose label
columns are zeros). `OUT/plan.json` names the labelling (written first), the shards are
`OUT/distill-IIIII-of-NNNNN.tfrecord` (each written atomically), and `OUT/stats.json`, written
once every shard exists, marks the cache complete and records each shard's size
(`shard_bytes`), so that a shard cut or changed afterwards is found (`shard_problem`) and a
rerun of the labelling writes it again.
"""

from __future__ import annotations

import numpy as np
from etils import epath

from bert_jax.atomic_write import read_json_object
from bert_jax.errors import BertJaxError
from bert_jax.shards import example
from bert_jax.shards.schema import Feature, Schema
from bert_jax.shards.tfrecord import count_records, read_records

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


def shard_name(index: int, num_shards: int) -> str:
    return f"distill-{index:05d}-of-{num_shards:05d}.tfrecord"


# What to do about a damaged shard: the labelling is deterministic, so it is written again.
REBUILD = "rerun the same `bert-jax distill-data` command to write it again"


def shard_rows(index: int, total: int, examples_per_shard: int) -> int:
    """Rows of shard `index` of a labelling of `total` rows."""
    return max(0, min(examples_per_shard, total - index * examples_per_shard))


def shard_problem(path: epath.Path, rows: int, size: int | None = None) -> str:
    """What is wrong with the shard at `path` that should hold `rows` records (and `size` bytes,
    where stats.json records it): "" when it is intact as far as its framing shows."""
    if not path.exists():
        return "missing"
    actual = path.stat().length
    if size is not None and actual != size:
        return f"{actual} bytes, stats.json records {size} (cut or changed after labelling)"
    try:
        n = count_records(path)
    except BertJaxError as e:
        return str(e).removeprefix(f"{path}: ")
    return f"{n} records, {rows} expected" if n != rows else ""


def schema(family: str, max_seq_length: int, num_outputs: int, regression: bool) -> Schema:
    L = max_seq_length
    feats = [Feature(k, L, "int64") for k in INPUT_KEYS] + [Feature("has_label", 1, "int64")]
    if family == "glue":
        feats.append(Feature("labels", 1, "float32" if regression else "int64"))
        feats.append(Feature("teacher_logits", num_outputs, "float32"))
    elif family == "ner":
        feats.append(Feature("labels", L, "int64"))
        feats.append(Feature("label_weights", L, "float32"))
        feats.append(Feature("teacher_logits", L * num_outputs, "float32"))
    else:
        feats.append(Feature("start_positions", 1, "int64"))
        feats.append(Feature("end_positions", 1, "int64"))
        feats.append(Feature("teacher_logits", 2 * L, "float32"))
    return tuple(feats)


def records(arrays: dict[str, np.ndarray], logits: np.ndarray, feats: Schema) -> list[bytes]:
    """The shard records of `arrays` (featurised rows plus has_label) and the teacher's outputs."""
    n = len(logits)
    columns = {}
    for f in feats:
        a = np.asarray(logits if f.name == "teacher_logits" else arrays[f.name])
        columns[f.name] = a.reshape(n, -1).astype(np.float32 if f.dtype == "float32" else np.int64)
    return example.encode_batch(columns)


def read_stats(directory: str | epath.Path) -> dict:
    d = epath.Path(directory)
    if not d.is_dir():
        raise BertJaxError(f"config distill.data={directory}: no such directory")
    if not (d / "stats.json").exists():
        raise BertJaxError(
            f"{d}: no stats.json, so the labelling is not finished; rerun the same "
            "`bert-jax distill-data` command to complete it"
        )
    return read_json_object(d / "stats.json", f"{d}/stats.json: unreadable")


def read_cache(directory: str | epath.Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(stats, arrays) of a complete cache, in the task's shapes: teacher_logits [N, C] (glue),
    [N, L, C] (ner) or [N, 2, L] (squad); labels [N] for glue."""
    stats = read_stats(directory)
    d = epath.Path(directory)
    feats = schema(stats["task_family"], stats["max_seq_length"], stats["num_outputs"],
                   stats["regression"])  # fmt: skip
    parts = []
    sizes = stats.get("shard_bytes") or [None] * stats["num_shards"]  # absent: an older cache
    total, per_shard = stats["examples"]["total"], stats["examples_per_shard"]
    for i in range(stats["num_shards"]):
        path = d / shard_name(i, stats["num_shards"])
        problem = shard_problem(path, shard_rows(i, total, per_shard), sizes[i])
        if problem:
            raise BertJaxError(f"{path}: {problem}; {REBUILD}")
        try:
            parts.append(example.decode_batch(list(read_records(str(path))), feats))
        except BertJaxError as e:  # a bad CRC: the bytes changed after labelling
            raise BertJaxError(f"{e}; {REBUILD}") from None
    arrays = {f.name: np.concatenate([p[f.name] for p in parts]) for f in feats}
    n, L, C = len(arrays["input_ids"]), stats["max_seq_length"], stats["num_outputs"]
    if n != total:
        raise BertJaxError(f"{d}: {n} rows in the shards, stats.json says {total}; {REBUILD}")
    out = {k: arrays[k].astype(np.int32) for k in (*INPUT_KEYS, "has_label")}
    out["has_label"] = out["has_label"][:, 0]
    family = stats["task_family"]
    if family == "glue":
        labels = arrays["labels"][:, 0]
        out["labels"] = labels if stats["regression"] else labels.astype(np.int32)
        out["teacher_logits"] = arrays["teacher_logits"]
    elif family == "ner":
        out["labels"] = arrays["labels"].astype(np.int32)
        out["label_weights"] = arrays["label_weights"]
        out["teacher_logits"] = arrays["teacher_logits"].reshape(n, L, C)
    else:
        out["start_positions"] = arrays["start_positions"][:, 0].astype(np.int32)
        out["end_positions"] = arrays["end_positions"][:, 0].astype(np.int32)
        out["teacher_logits"] = arrays["teacher_logits"].reshape(n, 2, L)
    return stats, out
