"""`distill-data`: a fine-tuned teacher labels the task's training rows and unlabeled transfer text;
the rows, with the teacher's outputs, go to TFRecord shards (`bert_jax.tasks.distill.cache`).

    stats = label(cfg, teacher="DIR", output_dir="OUT", input_file="embedded:", ...)

The rows (task rows first, then transfer rows, in input order) are cut into shards of
`examples_per_shard`; worker k of n labels shards k, k+n, ...; each shard is written under a
temporary name and renamed when complete, and a rerun skips the shards that exist, so a killed
run resumes, and the shards are the same bytes for any number of workers (each shard's rows are
labelled in the same batches). A rerun also checks the shards that exist (their record counts,
and their sizes where stats.json records them) and writes a damaged one again, and it removes
the temporary files of a killed run's unfinished shards. `plan.json` records what is labelled;
a rerun into the same directory with other inputs is refused. The worker that finds every shard
written writes stats.json, the mark of a complete cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math

import jax
import numpy as np
from etils import epath
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bert_jax.atomic_write import read_json_object, write_json_atomic
from bert_jax.errors import BertJaxError
from bert_jax.shards.tfrecord import TFRecordWriter
from bert_jax.tasks.arrays import eval_batches
from bert_jax.tasks.distill import cache, transfer
from bert_jax.tasks.distill.teacher import Teacher, load_teacher, vocab_fingerprint
from bert_jax.tasks.glue import get_spec
from bert_jax.tasks.jobs import make_job
from bert_jax.train.validate import check_renamed_keys


class TeacherPredictor:
    """The teacher's task head over batches of rows, data-parallel over this process's devices."""

    def __init__(self, teacher: Teacher, max_seq_length: int, batch_size: int):
        devices = jax.local_devices()
        self.batch_size = -(-batch_size // len(devices)) * len(devices)
        self.mesh = Mesh(np.array(devices), ("data",))
        self.task = teacher.task(max_seq_length, self.batch_size)
        replicated = NamedSharding(self.mesh, PartitionSpec())
        self.params = jax.device_put(teacher.params, replicated)
        self.rows = NamedSharding(self.mesh, PartitionSpec("data"))
        self._predict = jax.jit(self.task.predict)

    def __call__(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        """Outputs of every row: [N, C] (glue), [N, L, C] (ner), [N, 2, L] (squad)."""
        keys = cache.INPUT_KEYS
        outs = []
        for batch, real in eval_batches({k: arrays[k] for k in keys}, self.batch_size):
            out = self._predict(self.params, jax.device_put(dict(batch), self.rows))
            out = np.stack(out, 1) if isinstance(out, tuple) else np.asarray(out)
            outs.append(out[:real])
        return np.concatenate(outs).astype(np.float32)


def _digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for k in sorted(arrays):
        h.update(k.encode())
        h.update(np.ascontiguousarray(arrays[k]).tobytes())
    return h.hexdigest()


def _check_plan(out: epath.Path, plan: dict) -> None:
    path = out / "plan.json"
    if path.exists():
        old = read_json_object(path, f"{path}: unreadable")
        if old != plan:
            changed = sorted(k for k in plan if old.get(k) != plan[k])
            raise BertJaxError(
                f"{out}: holds another labelling (plan.json differs in {', '.join(changed)}); "
                "use a new --output_dir or delete that one"
            )
    else:
        write_json_atomic(path, plan, sort_keys=True, indent=1)


def _recorded_sizes(out: epath.Path, num_shards: int) -> list[int | None]:
    """Each shard's size as a finished labelling's stats.json records it (None: not known)."""
    path = out / "stats.json"
    stats = read_json_object(path, f"{path}: unreadable") if path.exists() else {}
    sizes = stats.get("shard_bytes")
    if not isinstance(sizes, list) or len(sizes) != num_shards:  # unfinished, or older
        return [None] * num_shards
    return sizes


def label(
    cfg,
    teacher: str,
    output_dir: str,
    input_file: str = "",
    *,
    examples_per_shard: int = 4096,
    num_workers: int = 1,
    worker_index: int = 0,
    pairing: str = "adjacent",
    max_transfer_examples: int = 0,
    seed: int = 0,
    teacher_step: int | None = None,
) -> dict:
    """Label and write this worker's shards; returns stats.json's content once every shard of
    the cache exists (else {"shards_written": ..., "shards_missing": ...})."""
    check_renamed_keys(cfg)  # an old config's `family` is refused naming task_family
    if examples_per_shard < 1:
        raise BertJaxError(f"--examples_per_shard={examples_per_shard}: must be >= 1")
    if num_workers < 1:
        raise BertJaxError(f"--num_workers={num_workers}: must be >= 1")
    if max_transfer_examples < 0:  # a slice with it would keep all but the last rows
        raise BertJaxError(
            f"--max_transfer_examples={max_transfer_examples}: must be >= 0 (0 = all rows)"
        )
    if not 0 <= worker_index < num_workers:
        raise BertJaxError(f"--worker_index={worker_index}: must be in [0, {num_workers})")
    if pairing not in transfer.PAIRINGS:
        raise BertJaxError(f"--pairing={pairing!r}: use one of {', '.join(transfer.PAIRINGS)}")
    t = load_teacher(teacher, cfg, teacher_step)  # every check before any data is read
    t = dataclasses.replace(t, config=t.config.replace(dtype=cfg.dtype))  # compute dtype
    regression = cfg.task_family == "glue" and get_spec(cfg.task).is_regression
    tokenizer = t.tokenizer(cfg.get("do_lower_case"))
    job = make_job(cfg, do_lower_case=tokenizer.do_lower_case)
    job.load(tokenizer)  # the task's own training rows, featurised as fine-tuning does
    rows, counts = transfer.training_rows(
        cfg, job, tokenizer, input_file, pairing, seed, max_transfer_examples
    )
    n = counts["total"]
    num_shards = max(1, math.ceil(n / examples_per_shard))
    plan = {
        "teacher": t.source,
        "teacher_step": teacher_step,
        "task_family": cfg.task_family,
        "task": cfg.get("task", ""),
        "data_dir": cfg.data_dir,
        "input_file": input_file,
        "pairing": pairing,
        "seed": seed,
        "max_seq_length": cfg.max_seq_length,
        "do_lower_case": tokenizer.do_lower_case,
        "examples_per_shard": examples_per_shard,
        "rows_sha256": _digest(rows),
    }
    out = epath.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    _check_plan(out, plan)
    feats = cache.schema(cfg.task_family, cfg.max_seq_length, t.num_outputs, regression)
    sizes = _recorded_sizes(out, num_shards)

    def problem(i: int) -> str:
        rows = cache.shard_rows(i, n, examples_per_shard)
        return cache.shard_problem(out / cache.shard_name(i, num_shards), rows, sizes[i])

    predictor = None
    written = 0
    for i in range(worker_index, num_shards, num_workers):
        path = out / cache.shard_name(i, num_shards)
        # A killed run's unfinished shard: its writer's temporary file (only this worker
        # writes shard i, so none of them is a live writer's).
        for tmp in out.glob(f".{path.name}.tmp-*"):
            tmp.unlink(missing_ok=True)
        if path.exists():
            why = problem(i)
            if not why:
                continue  # finished by an earlier run (shards appear only when complete)
            logging.warning("%s: %s; labelling it again", path, why)
            (out / "stats.json").unlink(missing_ok=True)  # the cache is incomplete until then
        predictor = predictor or TeacherPredictor(t, cfg.max_seq_length, cfg.eval_batch_size)
        part = {
            k: v[i * examples_per_shard : (i + 1) * examples_per_shard] for k, v in rows.items()
        }
        logits = predictor(part)
        with TFRecordWriter(path) as writer:
            for record in cache.records(part, logits, feats):
                writer.write(record)
        written += 1
        sizes[i] = None  # just written: the stats.json written below records its size
        logging.info("%s: %d rows labelled", path, len(logits))
    missing = [i for i in range(num_shards) if problem(i)]
    if missing:
        return {"shards_written": written, "shards_missing": len(missing)}
    stats = dict(plan)
    stats.update(
        {
            "examples": counts,
            "num_shards": num_shards,
            "num_outputs": t.num_outputs,
            "regression": regression,
            "teacher_vocab_sha256": vocab_fingerprint(t.vocab_file),
            "teacher_vocab_size": t.config.vocab_size,
            "schema": [[f.name, f.length, f.dtype] for f in feats],
            "shard_bytes": [
                (out / cache.shard_name(i, num_shards)).stat().length for i in range(num_shards)
            ],
        }
    )
    if not (out / "stats.json").exists():
        write_json_atomic(out / "stats.json", stats, sort_keys=True, indent=1)
    return json.loads(json.dumps(stats))
