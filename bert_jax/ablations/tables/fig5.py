"""BERT Figure 5: fine-tuning along pretraining. The masked-LM and left-to-right runs fine-tuned
on the pair task from their checkpoints at each quarter of pretraining; plotted per objective."""

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


def arms(scale: Scale) -> list[Arm]:
    model, steps = scale.model, scale.steps
    points = sorted({max(1, steps * k // 4) for k in (1, 2, 3, 4)})
    out = [Arm(RANDOM_INIT, Pretrain("mlm_nsp", model, 0), ("mrpc",))]
    for label, objective in _OBJECTIVES:
        run = Pretrain(objective, model, steps)
        out += [Arm(f"{label}@{s}", run, ("mrpc",), step=s) for s in points]
    return out


def claims(doc: dict) -> Iterator[Claim]:
    steps = sorted({int(a.split("@")[1]) for a in doc["arms"] if "@" in a})
    for s in steps:
        claim = f"MLM beats LTR on mrpc after {s} pretraining steps"
        yield beats(doc, f"MLM@{s}", f"LTR@{s}", "mrpc", claim, by_std=False)


def plot(doc: dict, ax: Axes) -> None:
    """Pair-task accuracy against pretraining steps, one line per objective (random init at 0)."""
    for label, _ in _OBJECTIVES:
        points = sorted(
            (int(arm.split("@")[1]), row["mrpc"]["median"])
            for arm, row in doc["arms"].items()
            if arm.startswith(f"{label}@")
        )
        if RANDOM_INIT in doc["arms"]:
            points.insert(0, (0, doc["arms"][RANDOM_INIT]["mrpc"]["median"]))
        ax.plot(*zip(*points, strict=True), marker="o", label=label)
    ax.set_xlabel("pretraining steps")
    ax.set_ylabel("pair task dev accuracy")
    ax.legend()


TABLE = Table(
    name="fig5",
    title="Figure 5: fine-tuning accuracy along pretraining",
    summary="fine-tuning along pretraining, MLM vs LTR (a PNG)",
    arms=arms,
    paper={},  # a figure: no number to put in a cell
    claims=claims,
    plot=plot,
)
