"""Finished task-distillation runs kept in the repository (experiments/task_distill/runs/), so
the study outlives the machine that ran it and is spread over several: one `run.json` per run,
about 1 KB (its dev accuracy, which dev examples it got right, its time, commit and device, and
digests of what it was made from). run.py brings in every kept run whose inputs match the ones
it would train from and trains only the rest; a kept run made from other inputs is refused by
name, with the field that differs.

What a run is made from (`inputs`): the task's files (sha256), the finetune flags, and for a
distilled student what determines its teacher-label cache: the kept teacher's identity, the
transfer multiple and the transfer text's sha256. The teacher's own identity is
the digest of its labels on the task inputs (the x0 cache: exact float logits). Those bits
depend on how training's reductions split across threads (measured 2026-12-01: two threadings
of one machine gave logits 5.7e-7 apart at most, every answer the same), so a teacher trained
again is taken for the kept one when its recipe, chosen rate, slice scores and every dev answer
agree (`teacher_differences`), and refused by name otherwise.
"""

from __future__ import annotations

import json
import pathlib
import re

import numpy as np

from bert_jax.ablations.provenance import digest_files


def task_digest(data: pathlib.Path) -> str:
    """The task's train and dev files."""
    return digest_files([(name, data / name) for name in ("dev.tsv", "train.tsv")])


def labels_digest(cache: pathlib.Path) -> str:
    """A teacher-label cache's shards (the rows and the teacher's logits; not its stats.json,
    which names paths)."""
    shards = sorted(cache.glob("distill-*.tfrecord"))
    if not shards:
        raise FileNotFoundError(f"{cache}: no distill-*.tfrecord shards")
    return digest_files([(p.name, p) for p in shards])


def teacher_differences(kept: dict, rate: str, slice_scores: dict, hits: np.ndarray) -> list[str]:
    """What tells a teacher trained again (same recipe) from the kept one, beyond its logits'
    float bits: its chosen rate, its slice scores, or any dev example answered otherwise."""
    out = []
    if rate != kept["rate"]:
        out.append(f"rate {rate} against the kept {kept['rate']}")
    if slice_scores != kept["slice_accuracy"]:
        out.append(f"slice accuracy {slice_scores} against the kept {kept['slice_accuracy']}")
    if len(hits) != len(kept["hits"]) or (changed := int((hits != kept["hits"]).sum())):
        out.append(f"{changed if len(hits) == len(kept['hits']) else 'all'} dev answers")
    return out


def slug(name: str) -> str:
    """A row name as a directory: "L2 random, distilled x4" -> "L2_random_distilled_x4"."""
    return re.sub(r"[^A-Za-z0-9.]+", "_", name).strip("_")


def pack_hits(hits: np.ndarray) -> str:
    return np.packbits(np.asarray(hits, bool)).tobytes().hex()


def unpack_hits(packed: str, n: int) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(bytes.fromhex(packed), np.uint8))[:n]
    return bits.astype(np.float64)


class KeptRuns:
    """The kept runs under `root` (root/<row slug>/<run>/run.json)."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root

    def path(self, row: str, run: str) -> pathlib.Path:
        return self.root / slug(row) / run / "run.json"

    def get(self, row: str, run: str, inputs: dict) -> dict | None:
        """The kept run, its `hits` unpacked; None when there is none. Raises ValueError naming
        the file and the differing fields when it was made from other inputs."""
        path = self.path(row, run)
        if not path.exists():
            return None
        try:
            kept = json.loads(path.read_text())
            kept_inputs = kept["inputs"]
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a kept run ({e}); remove it to run it again") from e
        differ = sorted(k for k in {*inputs, *kept_inputs} if inputs.get(k) != kept_inputs.get(k))
        if differ:
            raise ValueError(f"{path}: made from other inputs ({', '.join(differ)} differ: "
                             f"kept {[kept_inputs.get(k) for k in differ]}, here "
                             f"{[inputs.get(k) for k in differ]}); move it away to run it "
                             "again")  # fmt: skip
        return {**kept, "hits": unpack_hits(kept["dev_hits"], kept["dev_examples"])}

    def keep(self, row: str, run: str, inputs: dict, hits: np.ndarray, **fields) -> None:
        """Writes the run's record atomically (a temporary file renamed into place)."""
        path = self.path(row, run)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"row": row, "run": run, **fields, "dev_examples": len(hits),
                  "dev_hits": pack_hits(hits), "inputs": inputs}  # fmt: skip
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)

    def rows(self) -> list[str]:
        """The row names of every kept run, sorted."""
        names = {json.loads(p.read_text())["row"] for p in self.root.glob("*/*/run.json")}
        return sorted(names)
