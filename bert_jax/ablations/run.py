"""`bert-jax ablate`: every arm of a table, pretrain -> fine-tune each task over seeds -> table.

    ablate("5", SCALES["cpu"], "/tmp/ablate")    # writes /tmp/ablate/5.{json,md}

At `tpu` scale nothing trains here: `bert_jax.ablations.tpu` writes each arm's configs, checks
that they fit, and writes the launch script.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from etils import epath

from bert_jax.ablations import assembly, report, run_time, tables
from bert_jax.ablations.assembly import Job
from bert_jax.ablations.checks import PAIR_TASKS
from bert_jax.ablations.evidence import Evidence
from bert_jax.ablations.harness import Harness
from bert_jax.ablations.scales import SCALES, Scale
from bert_jax.ablations.tables import calibration
from bert_jax.ablations.unit_jobs import bring_in, keep, sibling_jobs, table_jobs, unit_jobs
from bert_jax.ablations.units import Units
from bert_jax.config import shape_dims
from bert_jax.errors import BertJaxError
from bert_jax.train.lock import WorkdirInUse
from bert_jax.train.shared_steps import shared_steps

RETRY_SECONDS = 30.0  # how often put-off jobs are retried while another process holds them


def scale_for(
    scale: str,
    steps: int = 0,
    model: str = "",
    seeds: int = 0,
    quick: bool = False,
    finetune_epochs: float = 0,
    finetune_lr: float = 0,
    sizes: str = "",
    pretrain_seeds: int = 0,
    batch: int = 0,
    learning_rate: float = 0,
    warmup: int | None = None,
    dropout: float | None = None,
) -> Scale:
    """`scale` (or `quick`) with the `bert-jax ablate` flags that override its fields: 0 = the
    scale's; `warmup` and `dropout` (the pretraining's) None = the scale's, as 0 is a recipe."""
    if scale not in SCALES or scale == "quick":
        raise BertJaxError(f"--scale={scale}: use cpu, host or tpu")
    s = SCALES["quick"] if quick else SCALES[scale]
    given = dict(steps=steps, model=model, seeds=seeds, finetune_epochs=finetune_epochs,
                 finetune_lr=finetune_lr, sizes=parse_sizes(sizes),
                 pretrain_seeds=pretrain_seeds, batch=batch,
                 learning_rate=learning_rate)  # fmt: skip
    for name, value in given.items():
        if isinstance(value, (int, float)) and value < 0:
            raise BertJaxError(f"--{name}={value}: must be positive (0 = the scale's)")
    overrides = {k: v for k, v in given.items() if v}
    if warmup is not None and warmup < 0:
        raise BertJaxError(f"--warmup={warmup}: must be at least 0 (unset = the scale's)")
    if dropout is not None and not 0 <= dropout < 1:
        raise BertJaxError(f"--pretrain_dropout={dropout}: must be in [0, 1) (unset = the scale's)")
    overrides |= {k: v for k, v in dict(warmup=warmup, dropout=dropout).items() if v is not None}
    if finetune_lr:  # a rate given is every arm's: none is chosen on a slice of train
        overrides["finetune_lrs"] = ()
    if finetune_epochs:  # and epochs given are every task's
        overrides["task_epochs"] = ()
    if model:  # an unknown preset would surface only when the first arm starts pretraining
        from bert_jax.config import preset

        try:
            preset(model)
        except BertJaxError as e:
            raise BertJaxError(f"--model={model}: {e}") from None
    return dataclasses.replace(s, **overrides)


def parse_sizes(text: str) -> tuple[tuple[int, int, int], ...]:
    """`--sizes L1-H128-A2,L4-H192-A3`: Table 6's grid as (L, H, A); "" = the scale's."""
    sizes = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        try:
            dims = shape_dims(name)
        except BertJaxError:
            dims = None
        if dims is None:
            raise BertJaxError(
                f"--sizes: {name!r} is not L<layers>-H<hidden>-A<heads> with L, A > 0 and H "
                "divisible by A (e.g. L4-H192-A3)"
            )
        sizes.append(dims)
    return tuple(dict.fromkeys(sizes))


def _share_compiled_steps(workdir: str) -> None:
    """Arms of a table compile identical train steps (same shapes, other weights): JAX's
    persistent compilation cache under the workdir compiles each once (halves a quick run)."""
    import jax

    if jax.config.jax_compilation_cache_dir is None and "://" not in workdir:
        jax.config.update("jax_compilation_cache_dir", f"{workdir}/jax_cache")
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@shared_steps()  # a fresh scope per call (contextlib's context managers decorate)
def _run_jobs(
    jobs: list[tuple[tables.Arm, str, int]],
    harness: Harness,
    table: str,
    tasks: dict[str, str],
    progress: Callable[[str], None],
    finished: Callable[[tables.Arm, str, int], None] | None = None,
) -> list[float]:
    """Each job's score, in job order. A job whose pretraining or fine-tuning workdir another
    live process holds (a second `bert-jax ablate` on this workdir, say another table sharing
    the run) is put off, and the others go on; the put-off jobs are retried after them, every
    RETRY_SECONDS while none can proceed, so two sweeps on one workdir split the work. A job
    put off again for the same reason is not announced again. Runs of one program (the same
    task and model shape in other arms, seeds or rates) share its jitted steps."""
    values: dict[int, float] = {}
    told: dict[int, str] = {}  # job -> why it was last put off
    waiting = list(range(len(jobs)))
    start = time.time()
    while waiting:
        put_off = []
        for i in waiting:
            arm, task, seed = jobs[i]
            header = (f"[{i + 1}/{len(jobs)}] table {table}: arm {arm.name!r}, "
                      f"task {tasks.get(task, task)}, seed {seed} ({time.time() - start:.0f}s)")
            why = harness.busy(arm, task, seed)
            if why is None:
                progress(header)
                try:
                    if task in tables.INTRINSIC:
                        values[i] = harness.intrinsic(arm, task)
                    else:
                        values[i] = harness.finetune(arm, task, seed)
                    if finished is not None:
                        finished(arm, task, seed)
                    continue
                except WorkdirInUse as e:  # taken between the look and the start
                    why = e.reason
            elif told.get(i) != why:
                progress(header)
            if told.get(i) != why:
                progress(f"  put off: {why}")
                told[i] = why
            put_off.append(i)
        if put_off and len(put_off) == len(waiting):
            time.sleep(RETRY_SECONDS)
        waiting = put_off
    return [values[i] for i in range(len(jobs))]


def _left_behind(harness: Harness, job: Job, progress: Callable[[str], None]) -> bool:
    """True (and said) for an unfinished job on a checkpoint along pretraining that this workdir
    lacks: its run was carried in from another machine past that step (bert_jax.ablations.units)."""
    arm, task, seed = job
    if arm.step is None or harness.finished(arm, task, seed):
        return False
    run = harness.root / "pretrain" / arm.pretrain.key
    if (run / "checkpoints" / str(arm.step)).exists():
        return False
    progress(f"  left out: arm {arm.name!r}, task {task}, seed {seed}: no step-{arm.step} "
             f"checkpoint in {run} (a run carried in from another machine brings its latest "
             "only); run it where that checkpoint is")  # fmt: skip
    return True


def _run_units(
    jobs: list[Job],
    siblings: list[tuple[str, Job]],
    harness: Harness,
    table: str,
    tasks: dict[str, str],
    progress: Callable[[str], None],
    kept: Callable[[tables.Arm, str, int], None] | None,
) -> list[Job]:
    """Unit after unit (one pretraining run each): the table's jobs on it, its no-context
    check, then each other table's jobs on its checkpoints, so a stop cut short leaves whole
    units. Returns every job run."""
    done = []
    for key in dict.fromkeys(arm.pretrain.key for arm, _, _ in jobs):
        own = [job for job in jobs if job[0].pretrain.key == key]
        _run_jobs(own, harness, table, tasks, progress, kept)
        for arm in {a.name: a for a, _, _ in own}.values():
            if arm.step is None:
                harness.masked_lm_check(arm.pretrain)  # needs the checkpoint: made here
        theirs = [(name, job) for name, job in siblings if job[0].pretrain.key == key]
        theirs = [(name, job) for name, job in theirs if not _left_behind(harness, job, progress)]
        for other in dict.fromkeys(name for name, _ in theirs):
            group = [job for name, job in theirs if name == other]
            _run_jobs(group, harness, other, tasks, progress, kept)
            own += group
        done += own
    return done


def _carry(
    store: Units, harness: Harness, jobs: list[Job], progress: Callable[[str], None]
) -> list[str]:
    """The pretraining runs of the units with unfinished jobs carried into them (Units.carry),
    said. Jobs on a checkpoint along the run (Figure 5's) do not count: only the latest travels."""
    try:
        left = [arm.pretrain for arm, task, seed in jobs
                if arm.step is None and not harness.finished(arm, task, seed)]  # fmt: skip
        said = store.carry(left)
    except Exception as e:  # a failed carry is said, never put in place of what stopped the run
        said = [f"carrying the unfinished pretraining runs failed: {e}"]
    for line in said:
        progress(line)
    return said


def _keep_and_carry(
    store: Units, harness: Harness, jobs: list[Job], progress: Callable[[str], None]
) -> list[str]:
    """What an unfinished units run has made, saved in its units: the finished runs of its
    unfinished jobs (a job's rate-choice runs finish one by one, long before the job does), then
    its pretraining checkpoints (`_carry`, whose lines are returned). A failed keep is said,
    never put in place of what stopped the run."""
    try:
        if added := keep(store, harness, jobs):
            progress(f"kept {added} files of finished runs in {store.root}")
    except Exception as e:
        progress(f"keeping the finished runs failed: {e}")
    return _carry(store, harness, jobs, progress)


def ablate(
    table: str,
    scale: Scale,
    workdir: str,
    corpus: str = "",
    tasks: dict[str, str] | None = None,
    progress: Callable[[str], None] = print,
    only_tasks: tuple[str, ...] = (),
    units_dir: str = "",
    units: tuple[tuple[str, int], ...] = (),
    vocab: str = "",
    assemble: bool = False,
    carry: bool = False,
) -> dict | None:
    """Runs (or continues) every arm of `table`; writes and returns the table document.
    `only_tasks`: the table's columns to run and report (all when empty). `units_dir`: finished
    runs are brought in from the units there first and every finished run is kept there
    (bert_jax.ablations.units). `units`: run only these (arm, pretraining seed) units of the
    table, with what other tables need of their checkpoints (unit_jobs.sibling_jobs), keep them
    in `units_dir` and write no table (None is returned). `vocab`: a vocab.txt
    or sentencepiece model to use instead of training one (bert_jax.ablations.given_vocab).
    `assemble`: train nothing; the table from every finished unit in `units_dir`, each arm over
    as many pretraining runs as it has there (bert_jax.ablations.assembly). `carry`: train
    nothing; keep the `units`' finished runs (a killed job's finished rate-choice runs too) and
    copy their unfinished latest pretraining checkpoints into them, to be continued on another
    machine (bert_jax.ablations.units; a units run that stops on an error or signal does both
    itself)."""
    if assemble and (units or not units_dir):
        raise BertJaxError("--assemble: give --units_dir (the units to assemble the table from) "
                           "and no --units")  # fmt: skip
    _share_compiled_steps(workdir)
    spec = tables.get(table)
    arms = spec.arms(scale)
    every = list(dict.fromkeys(t for arm in arms for t in arm.tasks))
    arms, left_out = tables.select_tasks(table, arms, only_tasks)
    if units and not units_dir:
        raise BertJaxError("--units: give --units_dir, where the finished units are kept")
    if carry and not units:
        raise BertJaxError("--carry: give --units (whose unfinished pretraining to carry) and "
                           "--units_dir (where to)")  # fmt: skip
    units_text = ", ".join(f"{a}:{p}" for a, p in units)
    if not units:
        report.check_keeps_columns(workdir, table, every, only_tasks)
    tasks = tasks or {}
    harness = Harness(workdir, scale, corpus, tasks, progress, vocab)
    jobs = table_jobs(arms, scale)
    store = bring_in(harness, units_dir, progress, carried=not assemble)
    if units:
        jobs = unit_jobs(table, arms, scale, jobs, units)
        if carry:
            theirs = [job for _, job in sibling_jobs(table, scale, jobs)]
            if not _keep_and_carry(store, harness, [*jobs, *theirs], progress):
                progress(f"no pretraining checkpoint to carry for units {units_text}: they "
                         "are finished, start from a released model, or have none in "
                         f"{harness.root}")  # fmt: skip
            return None
    used = None
    if assemble:
        seeds = [m["pretraining_seed"] for m in store.manifests().values()]
        scale = dataclasses.replace(scale, pretrain_seeds=max(seeds, default=0) + 1)
        jobs, used = assembly.finished_units(harness, table_jobs(arms, scale))
        assembly.check_any(jobs, used, f"table {table} in {store.root}")
        arms = [a for a in arms if a.name in used["runs"]]
        progress("\n".join(assembly.describe(used)))
    siblings = sibling_jobs(table, scale, jobs) if units else []
    if (left := harness.to_do([*jobs, *(job for _, job in siblings)])) is not None:
        progress(left)
    start = time.time()
    # --assemble reads the units and never writes to them (a cache made here stays here).
    keeps = store is not None and not assemble
    added: list[int] = []  # files each finished job's keep copied out
    kept = None if not keeps else (
        lambda arm, task, seed: added.append(keep(store, harness, [(arm, task, seed)])))
    if units:
        try:
            done = _run_units(jobs, siblings, harness, table, tasks, progress, kept)
        except BaseException:  # SIGTERM at a stop's end, Ctrl-C, a fault: carry what is made
            _keep_and_carry(store, harness, [*jobs, *(job for _, job in siblings)], progress)
            raise
        added.append(keep(store, harness, done))
        store.drop_carried(arm.pretrain for arm, _, _ in jobs)
        progress(f"units {units_text} finished; "
                 f"{sum(added)} files kept in {store.root} ({time.time() - start:.0f}s)")
        return None
    values = _run_jobs(jobs, harness, table, tasks, progress, kept)
    scores: dict[str, dict[str, list[float]]] = {}
    examples: dict[str, dict[str, list]] = {}  # arm -> task -> per-run example rows
    groups: dict[str, dict[str, list[int]]] = {}  # arm -> task -> each run's pretraining seed
    for (arm, task, seed), value in zip(jobs, values, strict=True):
        scores.setdefault(arm.name, {}).setdefault(task, []).append(value)
        if (rows_ := harness.example_rows(arm, task, seed)) is not None:
            examples.setdefault(arm.name, {}).setdefault(task, []).append(rows_)
            groups.setdefault(arm.name, {}).setdefault(task, []).append(arm.pretrain.seed)
    rows = {
        arm: {t: report.summarize(v, spec.paper_number(arm, t)) for t, v in row.items()}
        for arm, row in scores.items()
    }
    if used is not None:  # each pretraining run's mean score, to read the spread by
        used["run_means"] = assembly.run_means(jobs, values)
    kinds = {t.removesuffix("_feature") for a in arms for t in a.tasks if t not in tables.INTRINSIC}
    baselines = {k: harness.baselines(k) for k in sorted(kinds)}
    # Every arm is also set against the best constant of the scored split, example by example.
    constants = {k: harness.constant_rows(k, b["constant_answer"]) for k, b in baselines.items()}
    for task in [t for a in arms for t in a.tasks if t.endswith("_feature")]:
        baselines[task] = baselines[task.removesuffix("_feature")]
        constants[task] = constants[task.removesuffix("_feature")]
    # The held-out pairs are every arm's: one scored run's labels give the pair tasks' constant
    # (the "none" arm's fresh head is chance, but which label it favours is a coin flip per seed).
    for task, arm in {t: a for a, t, _ in jobs if t in PAIR_TASKS}.items():
        baselines[task], constants[task] = harness.pair_constant(arm, task)
    budget = None  # a table of intrinsic tasks only fine-tunes nothing
    if kinds:
        budget = {"epochs": scale.finetune_epochs, "learning_rate": scale.finetune_lr,
                  "task_epochs": dict(scale.task_epochs),
                  "seq": {t: harness.finetune_seq(a, t) for a in arms for t in a.tasks
                          if t not in tables.INTRINSIC and not a.pretrain.checkpoint}}  # fmt: skip
        released = {a.name: {t: harness.finetune_seq(a, t) for t in a.tasks
                             if t not in tables.INTRINSIC} for a in arms if a.pretrain.checkpoint}
        if released:  # the calibration's ceiling: counted in its own vocab
            budget["released_seq"] = released
        if scale.finetune_lrs:  # each arm's, per task, chosen on a slice of train
            budget["learning_rate"] = None
            budget["candidates"] = list(scale.finetune_lrs)
            budget["chosen"] = {a.name: {t: harness.learning_rate(a, t) for t in a.tasks
                                         if t not in tables.INTRINSIC} for a in arms}  # fmt: skip
    checks = {pretraining_name(a, a.pretrain.seed): harness.masked_lm_check(a.pretrain)
              for a, _, _ in jobs if a.step is None}  # fmt: skip
    pretraining = {name: check for name, check in checks.items() if check is not None}
    runs = [r for job in jobs for r in harness.job_runs(*job) if r.directory is not None]
    compute = run_time.spent((r.part, r.directory) for r in runs)
    if keeps:
        keep(store, harness, jobs)  # the checks' caches made above
    made = harness.provenance(r.directory for r in runs)
    if used is not None:  # each arm's own number of pretraining runs
        made["pretrain_seeds"] = {arm: len(seeds) for arm, seeds in used["runs"].items()}
    calibrated = calibration_doc(workdir, table)
    doc = report.write(workdir, table, scale.name, rows, baselines, budget, pretraining,
                       Evidence(examples, groups, constants),
                       calibration.uncalibrated(calibrated), compute,
                       calibration.ceiling(calibrated, budget), left_out, made,
                       used)  # fmt: skip
    wrote = f"wrote {workdir}/{table}.json and {table}.md ({time.time() - start:.0f}s)"
    if doc.get("wiring_check"):
        progress(f"{wrote}: {report.WIRING_CHECK}")
    else:
        progress(f"{wrote}: of {spec.whose} {len(doc['claims'])} claims checked here, "
                 f"{report.tally(doc['claims'])}")  # fmt: skip
    return doc


def calibration_doc(workdir: str, table: str) -> dict | None:
    """The workdir's calibration document, when it has been run (and `table` is another): it
    keeps uncalibrated tasks out of `table`'s claims and gives its md the ceiling row."""
    from bert_jax.ablations.tables import calibration

    path = epath.Path(workdir) / "calibration.json"
    if table == calibration.TABLE.name or not path.exists():
        return None
    return report.read(str(path))


def pretraining_name(arm: tables.Arm, pretrain_seed: int) -> str:
    """The row naming `arm`'s pretraining run of seed `pretrain_seed` in the no-context bars."""
    return arm.name if not pretrain_seed else f"{arm.name}, pretraining seed {pretrain_seed}"
