"""A table's per-example evidence: every run's dev statistics (stats.example_rows), the
pretraining run each came from, and each task's best constant answered on every example.

The intervals and verdicts are computed from it (`intervals`). It is saved beside the table's
json as `<stem>.rows.npz`, so a report can be re-analysed after its workdir is gone, say with
another bootstrap, without rerunning a single arm:

    bert-jax ablate --rerender experiments/ablations/results/table5_cpu_DATE.json
"""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile

import numpy as np
from etils import epath

from bert_jax.ablations import stats
from bert_jax.atomic_write import write_bytes_atomic
from bert_jax.errors import BertJaxError

SUFFIX = ".rows.npz"


@dataclasses.dataclass
class Evidence:
    examples: dict[str, dict[str, list[np.ndarray]]]  # arm -> task -> one array per run
    groups: dict[str, dict[str, list[int]]]  # arm -> task -> each run's pretraining seed
    constants: dict[str, np.ndarray]  # task -> its best constant's rows

    def intervals(self) -> dict[str, dict[str, dict]]:
        """Every pair of arms sharing a task (in arm order), and every arm against the task's
        best constant: A minus B with its paired bootstrap 95% interval over the dev examples
        and the runs (stats.paired_difference), the runs drawn by pretraining run first."""
        out: dict[str, dict[str, dict]] = {}
        names = list(self.examples)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                for task in sorted(self.examples[a].keys() & self.examples[b].keys()):
                    d = stats.paired_difference(
                        self.examples[a][task], self.examples[b][task], task,
                        groups_a=self.groups.get(a, {}).get(task),
                        groups_b=self.groups.get(b, {}).get(task),
                    )  # fmt: skip
                    out.setdefault(task, {})[f"{a} - {b}"] = d
        for task, constant in self.constants.items():
            for name, by_task in self.examples.items():
                if task in by_task:
                    d = stats.paired_difference(by_task[task], [constant], task,
                                                groups_a=self.groups[name][task])  # fmt: skip
                    out.setdefault(task, {})[f"{name} - {stats.BEST_CONSTANT}"] = d
        return out

    def save(self, path: epath.Path) -> None:
        """One compressed npz: the arrays in order, and an index saying what each one is."""
        index, arrays = [], []
        for arm, by_task in self.examples.items():
            for task, runs in by_task.items():
                for rows, group in zip(runs, self.groups[arm][task], strict=True):
                    index.append({"arm": arm, "task": task, "pretraining_seed": group})
                    arrays.append(rows)
        for task, rows in self.constants.items():
            index.append({"constant": task})
            arrays.append(rows)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, index=np.array(json.dumps(index)),
                            **{f"a{i}": a for i, a in enumerate(arrays)})  # fmt: skip
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
        except (zipfile.BadZipFile, KeyError, ValueError, EOFError, OSError) as e:
            raise BertJaxError(
                f"{path}: not a readable rows file ({type(e).__name__}: {e}); it is written "
                "whole or not at all, so it was cut or changed after: copy it again from where "
                "the table was run"
            ) from None
        out = cls({}, {}, {})
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
