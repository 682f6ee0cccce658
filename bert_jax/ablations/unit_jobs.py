"""Which runs a table's units are, which a sweep still needs (`bert-jax ablate --plan`),
and the units kept beside the workdir (`--units_dir`, bert_jax.ablations.units): a unit is one
pretraining run with every fine-tuning and evaluation that needs its checkpoint, for every
table that shares the run (`sibling_jobs`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from bert_jax.ablations import run_time, tables
from bert_jax.ablations.assembly import Job
from bert_jax.ablations.harness import Harness
from bert_jax.ablations.layout import arm_subdir, last_checkpoint
from bert_jax.ablations.scales import Scale
from bert_jax.ablations.units import Units
from bert_jax.errors import BertJaxError


def table_jobs(arms: list[tables.Arm], scale: Scale) -> list[Job]:
    """(arm on one of its pretraining runs, task, fine-tuning seed) of every run of a table."""
    return [(seeded(arm, p), task, seed) for arm in arms
            for p in range(1 if arm.pretrain.checkpoint else scale.pretrain_seeds)
            for task in arm.tasks
            for seed in (range(1) if task in tables.INTRINSIC else range(scale.seeds))]  # fmt: skip


def sibling_jobs(table: str, scale: Scale, jobs: list[Job]) -> list[tuple[str, Job]]:
    """(table, job) of every other table at `scale` that needs the checkpoints of `jobs`'
    pretraining runs, on the tasks `jobs` have or on the pretrained model itself (INTRINSIC),
    and is not one of `jobs`' runs already: Table 5's No NSP unit brings Figure 5's points
    along its run (conll from its 2500-, 5000- and 7500-step checkpoints), Table 6's held-out
    loss and the NSP/SOP table's held-out pairs. A unit's checkpoints are not kept, so what
    needs them is made with it, or never."""
    keys = {arm.pretrain.key for arm, _, _ in jobs}
    tasks = {task for _, task, _ in jobs} | set(tables.INTRINSIC)
    made = {_run_of(job) for job in jobs}
    out = []
    for other in tables.names():
        if other == table:
            continue
        for job in table_jobs(tables.get(other).arms(scale), scale):
            arm, task, _ = job
            if arm.pretrain.key in keys and task in tasks and _run_of(job) not in made:
                made.add(_run_of(job))
                out.append((other, job))
    return out


def _run_of(job: Job) -> tuple[str, int]:
    """The run a job makes, whichever table's arm it is (shared arms are one run)."""
    arm, task, seed = job
    return arm_subdir(arm, task), seed


def parse_units(text: str) -> tuple[tuple[str, int], ...]:
    """`--units "No NSP:2,LTR & No NSP:2"` -> (("No NSP", 2), ("LTR & No NSP", 2)). An arm's
    name may hold commas (Table 6's "L=2,H=128,A=2:1"): an item ends at its ":SEED"."""
    out, item = [], ""
    for piece in text.split(","):
        item = f"{item},{piece}" if item else piece
        arm, sep, seed = item.rpartition(":")
        if sep and arm.strip() and seed.strip().isdigit():
            out.append((arm.strip(), int(seed)))
            item = ""
    if item.strip():
        raise BertJaxError(
            f"--units: {item.strip()!r} is not ARM:SEED (an arm of the table and a pretraining "
            "seed, e.g. 'No NSP:2')"
        )
    return tuple(dict.fromkeys(out))


def unit_jobs(
    table: str,
    arms: list[tables.Arm],
    scale: Scale,
    jobs: list[Job],
    units: tuple[tuple[str, int], ...],
) -> list[Job]:
    """The jobs of the chosen (arm, pretraining seed) units of the table."""
    names = [a.name for a in arms]
    for name, seed in units:
        if name not in names:
            raise BertJaxError(f"--units: table {table} has no arm {name!r} (its arms: "
                               f"{', '.join(names)})")  # fmt: skip
        arm = arms[names.index(name)]
        most = 1 if arm.pretrain.checkpoint else scale.pretrain_seeds
        if seed >= most:
            raise BertJaxError(
                f"--units: {name}:{seed}: the arm's pretraining seeds are 0..{most - 1} "
                f"(--pretrain_seeds {most}); give --pretrain_seeds {seed + 1} or more"
            )
    return [j for j in jobs if (j[0].name, j[0].pretrain.seed) in units]


def bring_in(
    harness: Harness, units_dir: str, progress: Callable[[str], None], carried: bool = True
) -> Units | None:
    """The units in `units_dir` brought into `harness`'s workdir (`carried`: with the checkpoints
    carried in unfinished units, which only a run that trains needs)."""
    if not units_dir:
        return None
    store = Units(harness, units_dir)
    if added := store.bring_in(carried):
        progress(f"brought in {added} files of finished runs from the units in {store.root}")
    for key, step in store.continued.items():
        progress(f"{key}: continues from its step-{step} checkpoint, carried in {store.root}")
    return store


def keep(store: Units, harness: Harness, jobs: list[Job]) -> int:
    """Each finished job's rows made beside its run, then its unit (and the unit of its arm's
    seed-0 run, where its rate was chosen) copied out."""
    for arm, task, seed in jobs:
        if harness.finished(arm, task, seed):
            harness.example_rows(arm, task, seed)
    on_seed0 = (dataclasses.replace(arm.pretrain, seed=0) for arm, _, _ in jobs)
    return store.keep([*(arm.pretrain for arm, _, _ in jobs), *on_seed0])


def plan(
    table: str,
    scale: Scale,
    workdir: str,
    corpus: str = "",
    tasks: dict[str, str] | None = None,
    progress: Callable[[str], None] = print,
    only_tasks: tuple[str, ...] = (),
    units_dir: str = "",
    vocab: str = "",
) -> list[dict]:
    """Which units (pretraining runs with their fine-tuning, other tables' on their checkpoints
    included: `sibling_jobs`) `table` still needs, after the units in `units_dir` are brought
    in, and about how long each takes by the finished runs of its kind; nothing is trained.
    Returns run_time.per_unit's list."""
    arms, _ = tables.select_tasks(table, tables.get(table).arms(scale), only_tasks)
    harness = Harness(workdir, scale, corpus, tasks or {}, progress, vocab)
    jobs = table_jobs(arms, scale)
    bring_in(harness, units_dir, progress)
    finished = list(harness._finished())
    siblings = [job for _, job in sibling_jobs(table, scale, jobs)]
    by_unit: dict[str, tuple[list[str], list[Job]]] = {}
    for job in jobs:
        names, unit = by_unit.setdefault(job[0].pretrain.key, ([], []))
        names.append(f"{job[0].name}:{job[0].pretrain.seed}")
        unit.append(job)
    for job in siblings:  # what other tables need of the unit's checkpoints, run with it
        by_unit[job[0].pretrain.key][1].append(job)
    units = [(key, list(dict.fromkeys(names)), [r for job in js for r in harness.job_runs(*job)])
             for key, (names, js) in by_unit.items()]  # fmt: skip
    out = run_time.per_unit(units, finished)
    for u in out:  # a finished run's held-out rows that its unit lacks (checks.rows_file)
        pretrained = (harness.root / "pretrain" / u["unit"] / "done.json").exists()
        u["rows_left"] = sorted({task for arm, task, seed in by_unit[u["unit"]][1]
                                 if pretrained and task in tables.INTRINSIC
                                 and not harness.finished(arm, task, seed)})  # fmt: skip
    todo = [u for u in out if u["rows_left"] or any(o["runs"] for o in u["left"].values())]
    whole = run_time.remaining([*(r for _, _, refs in units for r in refs), *finished])
    said = run_time.describe(whole) or "nothing to do"
    if lacking := sum(1 for u in out if u["rows_left"]):
        said += f"; and {lacking} finished runs' held-out rows, each from its checkpoint"
    progress(f"table {table} ({scale.name} scale): {len(out)} units, "
             f"{len(out) - len(todo)} finished, {len(todo)} to run; {said}")  # fmt: skip
    for u in out:
        said = run_time.describe(u["left"])
        state = "finished" if said is None else said.split("; about")[0]
        if u["rows_left"]:  # beside any runs left, or alone
            rows = f"its checkpoint's {', '.join(u['rows_left'])} rows (minutes)"
            said = state = f"to do: {rows}" if said is None else f"{state}, {rows}"
        run = harness.root / "pretrain" / u["unit"]
        if said and (run / "done.json").exists() and not last_checkpoint(run):
            state += (" (pretrained elsewhere, its checkpoint not here: run it where it was "
                      "pretrained, or pretrain it again)")  # layout.require_checkpoint
        if u["shared_with"]:  # run by whichever of them runs first
            state += f" (and the runs it shares with {', '.join(u['shared_with'])}, listed there)"
        progress(f"  {', '.join(u['arms'])} ({u['unit']}): {state}")
    if todo:
        chosen = ",".join(dict.fromkeys(n for u in todo for n in u["arms"]))
        progress(f'run them: bert-jax ablate --table {table} --units "{chosen}" ...')
    return out


def seeded(arm: tables.Arm, pretrain_seed: int) -> tables.Arm:
    """`arm` on its pretraining run of seed `pretrain_seed` (seed 0: the arm as declared)."""
    if not pretrain_seed:
        return arm
    return dataclasses.replace(
        arm, pretrain=dataclasses.replace(arm.pretrain, seed=pretrain_seed)
    )
