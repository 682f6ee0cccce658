"""Units: one pretraining run and every fine-tuning and evaluation a table made on its checkpoint,
kept as the small files the table is assembled from, so that results outlive the machine (and
workdir) that made them, and a table can be spread over several machines.

    UNITS_DIR/SCALE/KEY/manifest.json   what the unit was made with (provenance.shared) and by
                                        which commits on which devices
    UNITS_DIR/SCALE/KEY/pretrain/KEY/   done.json, run_time.json, the checks' caches
    UNITS_DIR/SCALE/KEY/finetune/...    per run: eval_results.json, run_time.json,
                                        example_rows.npz; the rate choices (choice.json)

The paths under KEY are the workdir's own (bert_jax.ablations.harness, .layout): `bring_in`
copies a unit's files into a workdir, where its runs then count as finished, and `keep` copies a
workdir's finished runs out. Neither replaces a file already there (the first finished copy of a
run is the one every table reads), and a run's marker file (done.json, eval_results.json,
choice.json) is copied last, so a copy cut short is not taken for a finished run. Checkpoints stay
on the machine that trained them: a unit's runs are finished there, together.

Units made with other settings, pretraining text or downstream data than the workdir's are
refused by name (`Workdir.digests`); the commit and device are recorded, not matched.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator

from etils import epath

from bert_jax.ablations import provenance
from bert_jax.ablations.tables import Pretrain
from bert_jax.atomic_write import write_bytes_atomic, write_json_atomic
from bert_jax.errors import BertJaxError

MANIFEST = "manifest.json"
# Finished-run markers, each written last by its run: what makes a directory worth carrying.
MARKERS = ("done.json", "eval_results.json", "choice.json")
# Beside a marker: the records a table reads (scores, run times, per-example rows, the checks'
# caches). Never checkpoints or predictions.
RECORDS = ("run_time.json", "example_rows.npz", "baselines.json", "mlm_loss_rows.npz")
# A pretraining run's settings and log too: an estimate of the runs left goes by its step rate.
PRETRAINING_RECORDS = ("config.json", "metrics.jsonl")
GROWING = "along_training.json"  # a per-step cache: merged, entry by entry
_PAIR_ROWS = "pair_rows_*.json"


def _finished_dirs(root: epath.Path, key: str) -> Iterator[epath.Path]:
    """Directories under `root` (a workdir or a unit) holding a finished run of pretraining run
    `key`'s unit: the pretraining run, then each fine-tuning and rate-choice run on it."""
    pretraining = root / "pretrain" / key
    if (pretraining / "done.json").exists():
        yield pretraining
    finetune = root / "finetune"
    for arm_dir in [finetune / key, *sorted(finetune.glob(f"{key}@*"))]:
        if arm_dir.exists():
            for marker in ("eval_results.json", "choice.json"):
                yield from (f.parent for f in provenance.files_under(arm_dir, marker))


def _carried(run_dir: epath.Path) -> list[epath.Path]:
    """The files of a finished run that a unit keeps, its marker last."""
    names = [*RECORDS, GROWING]
    if run_dir.parent.name == "pretrain":
        names += PRETRAINING_RECORDS
    files = [run_dir / n for n in names if (run_dir / n).exists()]
    files += sorted(run_dir.glob(_PAIR_ROWS))
    return files + [run_dir / m for m in MARKERS if (run_dir / m).exists()]


def _copy_run(src_root: epath.Path, run_dir: epath.Path, dst_root: epath.Path) -> int:
    """Copies `run_dir`'s carried files to the same place under `dst_root`; returns how many
    files it added or grew. Files there are kept (a growing cache gains the entries it lacks)."""
    rel = run_dir.relative_to(src_root)
    (dst_root / rel).mkdir(parents=True, exist_ok=True)
    added = 0
    for src in _carried(run_dir):
        dst = dst_root / rel / src.name
        if src.name == GROWING:
            have = json.loads(dst.read_text()) if dst.exists() else {}
            new = {**json.loads(src.read_text()), **have}
            if new != have:
                write_json_atomic(dst, new, sort_keys=True)
                added += 1
        elif not dst.exists():
            write_bytes_atomic(dst, src.read_bytes())
            added += 1
    return added


@dataclasses.dataclass
class Units:
    """The units under `directory` at the workdir's scale, against the workdir `harness`."""

    harness: object  # bert_jax.ablations.harness.Harness (not imported: it imports jax)
    directory: str

    def __post_init__(self) -> None:
        self.root = epath.Path(self.directory) / self.harness.scale.name

    def _check(self, unit: epath.Path) -> None:
        manifest = json.loads((unit / MANIFEST).read_text())
        ours = self.harness.digests()
        differ = [k for k in ours if manifest.get(k) != ours[k]]
        if differ:
            raise BertJaxError(
                f"{unit}: a unit made with another {', '.join(differ)} than the workdir "
                f"{self.harness.root} (other settings, pretraining text or downstream data): its "
                "runs cannot join these tables; move it out of the units directory, or run with "
                "the workdir settings it was made with"
            )

    def bring_in(self) -> int:
        """Copies every unit's finished runs into the workdir; returns the files added."""
        added = 0
        for manifest in sorted(self.root.glob(f"*/{MANIFEST}")):
            unit = manifest.parent
            self._check(unit)
            for run_dir in _finished_dirs(unit, unit.name):
                added += _copy_run(unit, run_dir, self.harness.root)
        return added

    def keep(self, runs: Iterable[Pretrain]) -> int:
        """Copies the workdir's finished runs of each pretraining run's unit out, with their
        manifests; returns the files added."""
        added = 0
        for run in {r.key: r for r in runs if not r.checkpoint}.values():
            unit = self.root / run.key
            if (unit / MANIFEST).exists():
                self._check(unit)
            new = sum(_copy_run(self.harness.root, d, unit)
                      for d in _finished_dirs(self.harness.root, run.key))  # fmt: skip
            if new or not (unit / MANIFEST).exists() and (unit / "pretrain").exists():
                write_json_atomic(unit / MANIFEST, self._manifest(run, unit), sort_keys=True)
            added += new
        return added

    def _manifest(self, run: Pretrain, unit: epath.Path) -> dict:
        return {
            "unit": run.key, "scale": self.harness.scale.name, "objective": run.objective,
            "model": run.model, "steps": run.steps, "mix": run.mix, "pretraining_seed": run.seed,
            **self.harness.digests(),
            "made_by": provenance.made_by(
                r.parent for r in provenance.files_under(unit, "run_time.json")
            ),
        }  # fmt: skip

    def manifests(self) -> dict[str, dict]:
        """Each unit's manifest, by key."""
        return {m.parent.name: json.loads(m.read_text())
                for m in sorted(self.root.glob(f"*/{MANIFEST}"))}  # fmt: skip
