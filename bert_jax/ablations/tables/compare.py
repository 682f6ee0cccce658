"""The comparisons the tables' claims are made of: one arm ahead of another on a task, every
pretrained arm ahead of random init. "By more than 3x the seed std" takes the larger std of the
two cells compared; a cell of one seed has no std, and its detail says so."""

from __future__ import annotations

from collections.abc import Iterator

from bert_jax.ablations.tables.base import Claim

RANDOM_INIT = "random init"  # the arm of an untrained model, in every table that has one


def cell(doc: dict, arm: str, task: str) -> dict | None:
    """The summary ({"median", "std", "n", "paper"}) of `arm` on `task`, if the table has it."""
    return doc["arms"].get(arm, {}).get(task)


def beats(doc: dict, winner: str, loser: str, task: str, claim: str, by_std: bool) -> Claim:
    """`winner` ahead of `loser` on `task` (by more than 3x the larger seed std if `by_std`)."""
    a, b = cell(doc, winner, task), cell(doc, loser, task)
    if a is None or b is None:
        return None
    margin, std = a["median"] - b["median"], max(a["std"], b["std"])
    holds = margin > 3 * std if by_std else margin > 0
    detail = f"{a['median']:.2f} vs {b['median']:.2f} (margin {margin:+.2f}"
    if min(a["n"], b["n"]) < 2:
        detail += ", one seed: no std)"
    else:
        detail += f", larger std {std:.2f})"
    return {"claim": claim, "holds": bool(holds), "detail": detail}


def over_random_init(doc: dict) -> Iterator[Claim]:
    """Every other arm beats random init, by more than 3x the seed std, on each shared task."""
    if RANDOM_INIT not in doc["arms"]:
        return
    for arm, row in doc["arms"].items():
        if arm == RANDOM_INIT:
            continue
        for task in row:
            if cell(doc, RANDOM_INIT, task) is not None:
                claim = f"{arm} beats random init on {task} by more than 3x the seed std"
                yield beats(doc, arm, RANDOM_INIT, task, claim, by_std=True)
