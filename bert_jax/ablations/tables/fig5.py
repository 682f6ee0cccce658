"""BERT Figure 5: fine-tuning along pretraining. The masked-LM and left-to-right runs fine-tuned
on the token task from their checkpoints at each quarter of pretraining; plotted per objective.

The paper plots MNLI. Our pair task (`mrpc`) is learned only by a model trained with NSP, and
these runs have none: at the cpu recipe (2026-11-28) every point of both objectives sat at the
pair task's best constant. The token task (`conll`) needs context and separates the two
objectives at the end of pretraining (Table 5), so the curve is drawn on it. Documents written
before hold `mrpc`: their claims are read on the task they hold.

Each point fine-tunes at the rate chosen for its run's end (since 2026-11-30; before, each
point chose its own on seed 0, and every MLM point chose the end's 3e-4), so a pretraining
seed's points need only that seed's checkpoints: a unit run for Table 5 makes them with it
(bert_jax.ablations.unit_jobs.sibling_jobs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from bert_jax.ablations.scales import Scale
from bert_jax.ablations.tables.base import Arm, Claim, Pretrain, Table
from bert_jax.ablations.tables.compare import RANDOM_INIT, beats

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# Arm names are LABEL@STEP; the labels' runs are Table 5's No NSP and LTR runs (trained once).
_OBJECTIVES = (("MLM", "mlm"), ("LTR", "ltr"))
TASK = "conll"


def arms(scale: Scale) -> list[Arm]:
    model, steps = scale.model, scale.steps
    points = sorted({max(1, steps * k // 4) for k in (1, 2, 3, 4)})
    out = [Arm(RANDOM_INIT, Pretrain("mlm_nsp", model, 0), (TASK,))]
    for label, objective in _OBJECTIVES:
        run = Pretrain(objective, model, steps)
        out += [Arm(f"{label}@{s}", run, (TASK,), step=_checkpoint(scale, s)) for s in points]
    return out


def _checkpoint(scale: Scale, step: int) -> int | None:
    """The checkpoint a point fine-tunes: the run's last (None) when the point is the end of
    pretraining, so that point is Table 5's own fine-tuning runs, trained once (the step's
    checkpoint is the last one: the same weights, the same results); with a second phase
    (`tpu`) the point is the end of phase 1, not the run's last."""
    return None if step == scale.steps and not scale.phase2_steps else step


def _task(doc: dict) -> str:
    return next((t for row in doc["arms"].values() for t in row), TASK)


def claims(doc: dict) -> Iterator[Claim]:
    steps = sorted({int(a.split("@")[1]) for a in doc["arms"] if "@" in a})
    task = _task(doc)
    for s in steps:
        claim = f"MLM beats LTR on {task} after {s} pretraining steps"
        yield beats(doc, f"MLM@{s}", f"LTR@{s}", task, claim, by_std=False)


def plot(doc: dict, ax: Axes) -> None:
    """The task's dev score against pretraining steps, one line per objective (random init
    at 0)."""
    task = _task(doc)
    for label, _ in _OBJECTIVES:
        points = sorted(
            (int(arm.split("@")[1]), row[task]["median"])
            for arm, row in doc["arms"].items()
            if arm.startswith(f"{label}@")
        )
        if RANDOM_INIT in doc["arms"]:
            points.insert(0, (0, doc["arms"][RANDOM_INIT][task]["median"]))
        ax.plot(*zip(*points, strict=True), marker="o", label=label)
    ax.set_xlabel("pretraining steps")
    ax.set_ylabel(f"{task} dev score")
    ax.legend()


TABLE = Table(
    name="fig5",
    title="Figure 5: fine-tuning along pretraining",
    summary="fine-tuning along pretraining, MLM vs LTR (a PNG)",
    arms=arms,
    paper={},  # a figure: no number to put in a cell
    claims=claims,
    plot=plot,
)
