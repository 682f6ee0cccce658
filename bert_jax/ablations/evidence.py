"""A table's per-example evidence: every run's dev statistics (stats.example_rows), the
pretraining run each came from, and each task's best constant answered on every example.

The intervals and verdicts are computed from it (`intervals`). It is saved beside the table's
json as `<stem>.rows.npz`, so a report can be re-analysed after its workdir is gone, say with
another interval, without rerunning a single arm:

    bert-jax ablate --rerender experiments/ablations/results/table5_cpu_DATE.json
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import zipfile
from collections.abc import Iterator

import numpy as np
from etils import epath

from bert_jax.ablations import interval, stats
from bert_jax.atomic_write import write_bytes_atomic
from bert_jax.errors import BertJaxError

SUFFIX = ".rows.npz"


@dataclasses.dataclass
class Evidence:
    examples: dict[str, dict[str, list[np.ndarray]]]  # arm -> task -> one array per run
    groups: dict[str, dict[str, list[int]]]  # arm -> task -> each run's pretraining seed
    constants: dict[str, np.ndarray]  # task -> its best constant's rows
    # What the rows belong to (`identity_of` the table document saved with them); None in
    # rows saved before 2026-11-29, which are judged by what they hold (`check_belongs`).
    identity: dict | None = None

    def pairs(self) -> Iterator[tuple[str, str, list, list, list | None, list | None]]:
        """(task, "A - B", A's runs, B's runs, A's groups, B's groups) of every pair of arms
        sharing a task (in arm order), then of every arm against the task's best constant."""
        names = list(self.examples)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                ex_a, ex_b = self.examples[a], self.examples[b]
                groups_a, groups_b = self.groups.get(a, {}), self.groups.get(b, {})
                for task in sorted(ex_a.keys() & ex_b.keys()):
                    yield (task, f"{a} - {b}", ex_a[task], ex_b[task], groups_a.get(task),
                           groups_b.get(task))  # fmt: skip
        for task, constant in self.constants.items():
            for name, by_task in self.examples.items():
                if task in by_task:
                    yield (task, f"{name} - {stats.BEST_CONSTANT}", by_task[task], [constant],
                           self.groups[name][task], None)  # fmt: skip

    def intervals(self) -> dict[str, dict[str, dict]]:
        """Each of `pairs`: A minus B with its calibrated 95% interval over the pretraining runs,
        fine-tuning runs and dev examples (bert_jax.ablations.interval)."""
        out: dict[str, dict[str, dict]] = {}
        for task, pair, runs_a, runs_b, groups_a, groups_b in self.pairs():
            d = interval.difference(runs_a, runs_b, task, groups_a=groups_a, groups_b=groups_b)
            out.setdefault(task, {})[pair] = d
        return out

    def save(self, path: epath.Path, identity: dict | None = None) -> None:
        """One compressed npz: the arrays in order, an index saying what each one is, and
        `identity` (or the one it was loaded with)."""
        index, arrays = [], []
        for arm, by_task in self.examples.items():
            for task, runs in by_task.items():
                for rows, group in zip(runs, self.groups[arm][task], strict=True):
                    index.append({"arm": arm, "task": task, "pretraining_seed": group})
                    arrays.append(rows)
        for task, rows in self.constants.items():
            index.append({"constant": task})
            arrays.append(rows)
        self.identity = identity if identity is not None else self.identity
        named = {"index": np.array(json.dumps(index))}
        if self.identity is not None:
            named["identity"] = np.array(json.dumps(self.identity))
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **named, **{f"a{i}": a for i, a in enumerate(arrays)})
        write_bytes_atomic(path, buffer.getvalue())

    @classmethod
    def load(cls, path: epath.Path) -> Evidence:
        if not path.exists():
            raise BertJaxError(
                f"{path}: no such file: a table's per-example rows are saved beside its json "
                "since 2026-11-28; older reports have none"
            )
        try:
            with np.load(io.BytesIO(path.read_bytes())) as npz:
                index = json.loads(str(npz["index"]))
                arrays = [npz[f"a{i}"] for i in range(len(index))]
                identity = json.loads(str(npz["identity"])) if "identity" in npz else None
        except (zipfile.BadZipFile, KeyError, ValueError, EOFError, OSError) as e:
            raise BertJaxError(
                f"{path}: not a readable rows file ({type(e).__name__}: {e}); it is written "
                "whole or not at all, so it was cut or changed after: copy it again from where "
                "the table was run"
            ) from None
        out = cls({}, {}, {}, identity)
        for entry, rows in zip(index, arrays, strict=True):
            if "constant" in entry:
                out.constants[entry["constant"]] = rows
                continue
            arm, task = entry["arm"], entry["task"]
            out.examples.setdefault(arm, {}).setdefault(task, []).append(rows)
            out.groups.setdefault(arm, {}).setdefault(task, []).append(entry["pretraining_seed"])
        return out


def rows_path(doc_path: epath.Path) -> epath.Path:
    """`W/5.json` -> `W/5.rows.npz`."""
    return doc_path.parent / (doc_path.name.removesuffix(".json") + SUFFIX)


def identity_of(doc: dict) -> dict:
    """What a table document's rows belong to: its table, scale, arms with their tasks, and a
    digest of its scores (another run of the same table and tasks has others)."""
    arms = json.loads(json.dumps(doc["arms"]))  # as the json holds them (tuples are lists)
    digest = hashlib.sha256(json.dumps(arms, sort_keys=True).encode()).hexdigest()
    tasks = {arm: list(row) for arm, row in arms.items()}
    return {"table": doc["table"], "scale": doc["scale"], "arms": tasks, "arms_sha256": digest}


def _tasks(arms: dict[str, list[str]] | dict[str, dict]) -> list[str]:
    return list(dict.fromkeys(t for row in arms.values() for t in row))


def check_belongs(evidence: Evidence, doc: dict, rows: epath.Path, doc_path: epath.Path) -> None:
    """Raise naming both unless `evidence` (loaded from `rows`) is the one saved with the
    document at `doc_path`: by its identity, or, rows saved before they carried one, by what
    they hold against what the document's intervals were computed from."""
    fix = f"put the {rows.name} written together with {doc_path.name} beside it"
    theirs, ours = evidence.identity, identity_of(doc)
    if theirs is not None:
        if (theirs.get("table"), theirs.get("scale")) != (ours["table"], ours["scale"]):
            raise BertJaxError(
                f"{rows}: the rows of table {theirs.get('table')} ({theirs.get('scale')} scale), "
                f"not of table {ours['table']} ({ours['scale']} scale) as {doc_path}: {fix}"
            )
        if theirs.get("arms") != ours["arms"]:
            tasks = _tasks(theirs["arms"]), _tasks(ours["arms"])
            held = [", ".join(t) for t in tasks] if tasks[0] != tasks[1] else [
                f"arms {', '.join(arms)}" for arms in (theirs["arms"], ours["arms"])
            ]  # fmt: skip
            raise BertJaxError(
                f"{rows}: table {ours['table']}'s rows of {held[0]}, not of {held[1]} as "
                f"{doc_path}: {fix}"
            )
        if theirs.get("arms_sha256") != ours["arms_sha256"]:
            raise BertJaxError(
                f"{rows}: the rows of another run of table {ours['table']} (their scores are not "
                f"those in {doc_path}): {fix}"
            )
        return
    # Without an identity: the examples and runs of each stored interval (per task and pair
    # of arms) must be what these rows give.
    held: dict[str, dict] = {}
    for task, pair, runs_a, runs_b, _, _ in evidence.pairs():
        held.setdefault(task, {})[pair] = (len(runs_a[0]), [len(runs_a), len(runs_b)])
    stored = {task: {pair: (d.get("examples"), d.get("runs")) for pair, d in by_pair.items()}
              for task, by_pair in (doc.get("intervals") or {}).items()}  # fmt: skip
    if held != stored:
        task = next(t for t in dict.fromkeys([*stored, *held]) if held.get(t) != stored.get(t))
        raise BertJaxError(
            f"{rows}: rows of arms {', '.join(evidence.examples) or 'none'} on "
            f"{', '.join(held) or 'no task'}, not {doc_path}'s (its intervals on {task} were "
            f"computed from other rows): {fix}"
        )
