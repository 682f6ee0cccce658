"""Units: one pretraining run and every fine-tuning and evaluation a table made on its checkpoint,
kept as the small files the table is assembled from, so that results outlive the machine (and
workdir) that made them, and a table can be spread over several machines.

    UNITS_DIR/SCALE/KEY/manifest.json   what the unit was made with (provenance.shared) and by
                                        which commits on which devices
    UNITS_DIR/SCALE/KEY/pretrain/KEY/   done.json, run_time.json, the checks' caches
    UNITS_DIR/SCALE/KEY/finetune/...    per run: eval_results.json, run_time.json,
                                        example_rows.npz; the rate choices (choice.json)

    UNITS_DIR/SCALE/KEY/carry/STEP/     the pretraining run's latest checkpoint, with its
                                        config, log and run time, while the unit is unfinished

The paths under KEY are the workdir's own (bert_jax.ablations.harness, .layout): `bring_in`
copies a unit's files into a workdir, where its runs then count as finished, and `keep` copies a
workdir's finished runs out. Neither replaces a file already there (the first finished copy of a
run is the one every table reads), and a run's marker file (done.json, eval_results.json,
choice.json) is copied last, so a copy cut short is not taken for a finished run. Checkpoints stay
on the machine that trained them: a unit's runs are finished there, together.

A unit too long for one machine's time is carried: `carry` copies its pretraining run's latest
checkpoint (about 11 MB at the cpu scale: weights and Adam's moments, so an unfinished run
continues exactly; a finished one's last, for the fine-tuning left) into the unit, and `bring_in`
puts it in another workdir's run, which resumes or fine-tunes from it. Only the latest checkpoint
travels: fine-tuning from an earlier one (Figure 5's points) is left to the machine that has it.
The carried files go once the unit's runs are all finished (`drop_carried`).

Units made with other settings, pretraining text or downstream data than the workdir's are
refused by name (`Workdir.digests`); the commit and device are recorded, not matched.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator

from etils import epath

from bert_jax.ablations import provenance
from bert_jax.ablations.layout import last_checkpoint, latest_step
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
CARRY = "carry"
# What an unfinished pretraining run's continuation needs beside its checkpoint.
CARRIED_RECORDS = ("config.json", "metrics.jsonl", "run_time.json")
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
    files it added or grew. A finished run's files there are kept (a growing cache gains the
    entries it lacks); an unfinished one's (a carried run's records up to its checkpoint) give
    way to the finished run's, so a workdir that once continued a carry assembles as a new one."""
    rel = run_dir.relative_to(src_root)
    (dst_root / rel).mkdir(parents=True, exist_ok=True)
    unfinished = not any((dst_root / rel / m).exists() for m in MARKERS)
    added = 0
    for src in _carried(run_dir):
        dst = dst_root / rel / src.name
        if src.name == GROWING:
            have = json.loads(dst.read_text()) if dst.exists() else {}
            new = {**json.loads(src.read_text()), **have}
            if new != have:
                write_json_atomic(dst, new, sort_keys=True)
                added += 1
        elif unfinished or not dst.exists():
            write_bytes_atomic(dst, src.read_bytes())
            added += 1
    return added


def _copy_tree(src: epath.Path, dst: epath.Path) -> int:
    """Copies every file under `src` to the same place under `dst`; returns their bytes."""
    size = 0
    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.iterdir()):  # epath walks no `**` (thousands of calls on gs://)
        if f.is_dir():
            size += _copy_tree(f, dst / f.name)
        else:
            data = f.read_bytes()
            (dst / f.name).write_bytes(data)
            size += len(data)
    return size


def carried_step(unit: epath.Path) -> int:
    """The step of the checkpoint carried in `unit` (0 without one)."""
    return latest_step(unit / CARRY)


def _continue(unit: epath.Path, workdir: epath.Path) -> int:
    """Puts the checkpoint carried in `unit` (with its records) into `workdir`'s pretraining run,
    unless that run is already as far on; returns the step put in (0 for none). The checkpoint is
    copied under another name and renamed to its step, so a copy cut short is never resumed."""
    step = carried_step(unit)
    run = workdir / "pretrain" / unit.name
    if not step or last_checkpoint(run) >= step:
        return 0
    carried = unit / CARRY / str(step)
    partial = run / f".carried-{step}"
    if partial.exists():
        partial.rmtree()
    _copy_tree(carried / "checkpoint", partial)
    (run / "checkpoints").mkdir(parents=True, exist_ok=True)
    partial.rename(run / "checkpoints" / str(step))
    for name in CARRIED_RECORDS:  # the run's record up to its checkpoint
        if (carried / name).exists():
            write_bytes_atomic(run / name, (carried / name).read_bytes())
    return step


@dataclasses.dataclass
class Units:
    """The units under `directory` at the workdir's scale, against the workdir `harness`."""

    harness: object  # bert_jax.ablations.harness.Harness (not imported: it imports jax)
    directory: str

    def __post_init__(self) -> None:
        self.root = epath.Path(self.directory) / self.harness.scale.name
        self.continued: dict[str, int] = {}  # run key -> the carried step `bring_in` put in

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

    def bring_in(self, carried: bool = True) -> int:
        """Copies every unit's finished runs into the workdir, and with `carried` the checkpoints
        carried in unfinished units (`continued`); returns the finished runs' files added."""
        added = 0
        for manifest in sorted(self.root.glob(f"*/{MANIFEST}")):
            unit = manifest.parent
            self._check(unit)
            for run_dir in _finished_dirs(unit, unit.name):
                added += _copy_run(unit, run_dir, self.harness.root)
            if carried and (step := _continue(unit, self.harness.root)):
                self.continued[unit.name] = step
        return added

    def carry(self, runs: Iterable[Pretrain]) -> list[str]:
        """Copies each pretraining run's latest checkpoint in the workdir into its unit's
        carry/STEP (the files that continue it: module docstring), replacing an earlier step's;
        returns a line for each run carried or already carried. For the runs of unfinished
        units: a finished run's last checkpoint is what its unit's fine-tuning left needs."""
        said = []
        for run in {r.key: r for r in runs if not r.checkpoint and r.steps}.values():
            src = self.harness.root / "pretrain" / run.key
            step = last_checkpoint(src)
            if not step:
                continue
            unit = self.root / run.key
            if (unit / MANIFEST).exists():
                self._check(unit)
            where, have = unit / CARRY / str(step), carried_step(unit)
            if have < step:
                partial = unit / CARRY / f"{step}.partial"
                if partial.exists():
                    partial.rmtree()
                size = _copy_tree(src / "checkpoints" / str(step), partial / "checkpoint")
                for name in CARRIED_RECORDS:
                    if (src / name).exists():
                        write_bytes_atomic(partial / name, (src / name).read_bytes())
                partial.rename(where)
                for old in (unit / CARRY).glob("*"):
                    if old != where:
                        old.rmtree()
                if not (unit / MANIFEST).exists():
                    write_json_atomic(unit / MANIFEST, self._manifest(run, unit), sort_keys=True)
                said.append(f"{run.key}: step {step} of {run.steps} carried to {where} "
                            f"({size / 1e6:.1f} MB); a run of the same units with this units "
                            "directory, on any machine, continues from it")  # fmt: skip
            else:
                said.append(f"{run.key}: step {have} already carried to {unit / CARRY}")
        return said

    def keep(self, runs: Iterable[Pretrain]) -> int:
        """Copies the workdir's finished runs of each pretraining run's unit out, with their
        manifests; returns the files added."""
        added = 0
        for run in {r.key: r for r in runs}.values():  # a released model's fine-tunings too
            unit = self.root / run.key
            if (unit / MANIFEST).exists():
                self._check(unit)
            new = sum(_copy_run(self.harness.root, d, unit)
                      for d in _finished_dirs(self.harness.root, run.key))  # fmt: skip
            if new or not (unit / MANIFEST).exists() and (unit / "pretrain").exists():
                write_json_atomic(unit / MANIFEST, self._manifest(run, unit), sort_keys=True)
            added += new
        return added

    def drop_carried(self, runs: Iterable[Pretrain]) -> None:
        """Deletes the checkpoints carried in the units of `runs`, whose runs are all finished."""
        for run in runs:
            if (self.root / run.key / CARRY).exists():
                (self.root / run.key / CARRY).rmtree()

    def _manifest(self, run: Pretrain, unit: epath.Path) -> dict:
        return {
            "unit": run.key, "scale": self.harness.scale.name, "objective": run.objective,
            "model": run.model, "steps": run.steps, "mix": run.mix, "pretraining_seed": run.seed,
            **({"checkpoint": run.checkpoint} if run.checkpoint else {}),
            **self.harness.digests(),
            "made_by": provenance.made_by(
                r.parent for r in provenance.files_under(unit, "run_time.json")
            ),
        }  # fmt: skip

    def manifests(self) -> dict[str, dict]:
        """Each unit's manifest, by key."""
        return {m.parent.name: json.loads(m.read_text())
                for m in sorted(self.root.glob(f"*/{MANIFEST}"))}  # fmt: skip
