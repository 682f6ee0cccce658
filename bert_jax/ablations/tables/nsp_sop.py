"""The NSP/SOP intrinsic cross-check (ALBERT Table 5's logic): models pretrained with no pair
loss, with NSP and with SOP, each scored on both pair tasks by its own held-out predictions."""

from __future__ import annotations

from collections.abc import Iterator

from bert_jax.ablations import stats
from bert_jax.ablations.scales import Scale
from bert_jax.ablations.tables.base import Arm, Claim, Pretrain, Table
from bert_jax.ablations.tables.compare import cell, interval, judged, levels, paper_effect

# ALBERT Table 5 (none 52.4/53.3, NSP 90.5/52.0, SOP 78.9/86.5): "near chance" is within this
# many points of chance: the best constant answer on the held-out pairs (documents from before
# it was measured: the "none" arm, a freshly initialised head); "well above" beyond.
NEAR_CHANCE_POINTS = 5.0
_TASKS = ("nsp", "sop")
_FRESH = "the fresh head of the model pretrained without a pair loss"
_CONSTANT = "the best constant answer on those pairs"


def arms(scale: Scale) -> list[Arm]:
    model, steps = scale.model, scale.steps
    return [
        Arm("none", Pretrain("mlm", model, steps), _TASKS),
        Arm("NSP", Pretrain("mlm_nsp", model, steps), _TASKS),
        Arm("SOP", Pretrain("mlm_sop", model, steps), _TASKS),
    ]


def _within(claim: str, d: dict, prefix: str) -> Claim:
    """A "near chance" claim by the interval of (arm - best constant): stats.equivalence
    within NEAR_CHANCE_POINTS."""
    return judged(claim, d, None, prefix, stats.equivalence(d, NEAR_CHANCE_POINTS))


def _vs_chance(doc: dict, arm: str, task: str, near: bool) -> Claim:
    """The arm's own head on `task`'s pairs against chance: by the paired interval over
    held-out pairs and pretraining seeds against the best constant answer on those pairs
    when the document has it, else (documents from before) against the "none" arm's fresh
    head by the medians and the NEAR_CHANCE_POINTS threshold."""
    a, none = cell(doc, arm, task), cell(doc, "none", task)
    if a is None or none is None:
        return None
    how = "near chance" if near else "well above chance"
    if (d := interval(doc, arm, stats.BEST_CONSTANT, task)) is not None:
        constant = doc["baselines"][task]["best_constant"]
        medians = f"{a['median']:.2f} vs {constant:.2f}"
        if near:
            claim = (f"the {arm} model is {how} on {task} pairs (within "
                     f"{NEAR_CHANCE_POINTS:g} points of {_CONSTANT})")  # fmt: skip
            return _within(claim, d, levels(d, medians))
        claim = f"the {arm} model is {how} on {task} pairs (ahead of {_CONSTANT})"
        return judged(claim, d, paper_effect(a, none), levels(d, medians))
    gap = a["median"] - none["median"]
    holds = abs(gap) <= NEAR_CHANCE_POINTS if near else gap > NEAR_CHANCE_POINTS
    bound = "within" if near else "more than"
    relation = "of" if near else "above"
    return {
        "claim": f"the {arm} model is {how} on {task} pairs ({bound} {NEAR_CHANCE_POINTS:g} "
        f"points {relation} {_FRESH})",
        "holds": bool(holds),
        "detail": f"{a['median']:.2f} vs {none['median']:.2f} ({gap:+.2f})",
    }


def claims(doc: dict) -> Iterator[Claim]:
    yield _vs_chance(doc, "NSP", "nsp", near=False)
    yield _vs_chance(doc, "NSP", "sop", near=True)
    yield _vs_chance(doc, "SOP", "sop", near=False)
    yield _vs_chance(doc, "SOP", "nsp", near=False)


TABLE = Table(
    name="nsp_sop",
    title="NSP/SOP intrinsic cross-check (ALBERT Table 5 logic)",
    summary="NSP/SOP intrinsic cross-check",
    arms=arms,
    paper={  # ALBERT's intrinsic pair accuracies
        "none": {"nsp": 52.4, "sop": 53.3},
        "NSP": {"nsp": 90.5, "sop": 52.0},
        "SOP": {"nsp": 78.9, "sop": 86.5},
    },
    claims=claims,
)
