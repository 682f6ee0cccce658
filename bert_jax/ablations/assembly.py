"""A table assembled from finished units alone (`bert-jax ablate --assemble`): each arm over
every pretraining run whose unit holds all of that arm's runs, however many runs each arm has
(one machine may have run six seeds of an arm and two of another); nothing is trained.

An arm with no such unit is left out of the table, and so are its claims (tables/compare.py
skips a comparison with an arm it lacks); a unit holding only some of an arm's runs (its
pretraining finished, a fine-tuning run not) is named and not used, so every arm's score is a
mean over whole pretraining runs, as the calibrated interval assumes (bert_jax.ablations.
interval).
"""

from __future__ import annotations

from bert_jax.ablations.tables import Arm
from bert_jax.errors import BertJaxError

Job = tuple[Arm, str, int]  # (arm on one of its pretraining runs, task, fine-tuning seed)


def finished_units(harness, jobs: list[Job]) -> tuple[list[Job], dict]:
    """The jobs of every (arm, pretraining run) whose runs have all finished in `harness`'s
    workdir (after its units were brought in), and what was used: {"runs": {ARM: [SEED]},
    "incomplete": {ARM: [SEED]}, "arms_left_out": [ARM]}. Looks; runs nothing."""
    by_run: dict[tuple[str, int], list[Job]] = {}
    for job in jobs:
        by_run.setdefault((job[0].name, job[0].pretrain.seed), []).append(job)
    kept: list[Job] = []
    runs: dict[str, list[int]] = {}
    incomplete: dict[str, list[int]] = {}
    for (arm, seed), group in by_run.items():
        done = [harness.finished(*job) for job in group]
        if all(done):
            kept += group
            runs.setdefault(arm, []).append(seed)
        elif any(done) or _pretrained(harness, group[0][0]):
            incomplete.setdefault(arm, []).append(seed)
    arms = list(dict.fromkeys(name for name, _ in by_run))
    left_out = [a for a in arms if a not in runs]
    return kept, {"runs": runs, "incomplete": incomplete, "arms_left_out": left_out}


def check_any(jobs: list[Job], used: dict, where: str) -> None:
    """Refuses an assembly that found no finished unit at `where`, saying when units were found
    that hold only some of their arm's runs."""
    if jobs:
        return
    some = sum(len(s) for s in used["incomplete"].values())
    raise BertJaxError(
        f"--assemble: no finished unit of {where}"
        + (f": {some} hold only some of their arm's runs (made with other --seeds or "
           "--only_tasks?)" if some else "")
    )  # fmt: skip


def _pretrained(harness, arm: Arm) -> bool:
    return not arm.pretrain.checkpoint and (
        harness.root / "pretrain" / arm.pretrain.key / "done.json"
    ).exists()


def run_means(jobs: list[Job], values: list[float]) -> dict[str, dict[str, list[float]]]:
    """ARM -> TASK -> each pretraining run's mean score over its fine-tuning seeds, in the
    order of the arm's runs."""
    by_run: dict[str, dict[str, dict[int, list[float]]]] = {}
    for (arm, task, _), value in zip(jobs, values, strict=True):
        runs = by_run.setdefault(arm.name, {}).setdefault(task, {})
        runs.setdefault(arm.pretrain.seed, []).append(value)
    return {arm: {task: [sum(v) / len(v) for v in runs.values()] for task, runs in row.items()}
            for arm, row in by_run.items()}  # fmt: skip


def describe(used: dict) -> list[str]:
    """The md's list saying which pretraining runs each arm was assembled from."""
    runs = "; ".join(f"{arm} {len(s)} ({', '.join(map(str, s))})"
                     for arm, s in used["runs"].items())  # fmt: skip
    lines = [f"- Assembled from finished units (--assemble), pretraining runs per arm (their "
             f"seeds): {runs}."]
    if used["arms_left_out"]:
        lines.append(f"- Arms with no finished unit, left out with their claims: "
                     f"{', '.join(used['arms_left_out'])}.")  # fmt: skip
    for arm, row in used.get("run_means", {}).items():
        for task, means in row.items():
            lines.append(f"- {arm} on {task}, each pretraining run's mean: "
                         f"{', '.join(f'{m:.2f}' for m in means)}.")  # fmt: skip
    if used["incomplete"]:
        part = "; ".join(f"{arm} seed {', '.join(map(str, s))}"
                         for arm, s in used["incomplete"].items())  # fmt: skip
        lines.append(f"- Units holding only some of an arm's runs, not used: {part}.")
    return lines
