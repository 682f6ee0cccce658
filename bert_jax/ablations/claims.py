"""Which of the papers' claims hold in a measured table: each a plain sentence, whether it
holds, and the numbers behind it, so a run's `<table>.md` says what it showed without anyone
reading the cells by hand.

    for c in check(doc): print("holds" if c["holds"] else "does not hold", c["claim"], c["detail"])

"By more than 3x the seed std" takes the larger std of the two cells compared; a cell of one
seed has no std, and its detail says so. Claims whose arms or tasks a table lacks (a user's
`--task` data, a table run in part) are left out rather than reported as failing.
"""

from __future__ import annotations

from collections.abc import Iterator

from bert_jax.ablations.tables import stack_size

# Table 5: pretrained vs random init on every task; MLM vs LTR on the pair, token, span tasks.
_MLM_OVER_LTR_TASKS = ("mrpc", "conll", "squad")
# NSP/SOP (ALBERT Table 5: none 52.4/53.3, NSP 90.5/52.0, SOP 78.9/86.5): "near chance" is
# within this many points of the "none" arm (a freshly initialised head), "well above" beyond.
NEAR_CHANCE_POINTS = 5.0


def _cell(doc: dict, arm: str, task: str) -> dict | None:
    return doc["arms"].get(arm, {}).get(task)


def _beats(doc: dict, winner: str, loser: str, task: str, claim: str, by_std: bool) -> dict | None:
    """`winner` ahead of `loser` on `task` (by more than 3x the larger seed std if `by_std`)."""
    a, b = _cell(doc, winner, task), _cell(doc, loser, task)
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


def _over_random_init(doc: dict) -> Iterator[dict | None]:
    if "random init" not in doc["arms"]:
        return
    for arm, row in doc["arms"].items():
        if arm == "random init":
            continue
        for task in row:
            if _cell(doc, "random init", task) is not None:
                claim = f"{arm} beats random init on {task} by more than 3x the seed std"
                yield _beats(doc, arm, "random init", task, claim, by_std=True)


def _table5(doc: dict) -> Iterator[dict | None]:
    yield from _over_random_init(doc)
    for task in _MLM_OVER_LTR_TASKS:
        claim = f"MLM (No NSP) beats LTR & No NSP on {task}"
        yield _beats(doc, "No NSP", "LTR & No NSP", task, claim, by_std=False)
    claim = "+ BiLSTM recovers part of LTR's span-task gap (squad above LTR & No NSP)"
    yield _beats(doc, "+ BiLSTM", "LTR & No NSP", "squad", claim, by_std=False)


def _fig5(doc: dict) -> Iterator[dict | None]:
    steps = sorted({int(a.split("@")[1]) for a in doc["arms"] if "@" in a})
    for s in steps:
        claim = f"MLM beats LTR on mrpc after {s} pretraining steps"
        yield _beats(doc, f"MLM@{s}", f"LTR@{s}", "mrpc", claim, by_std=False)


def _nsp_sop(doc: dict) -> Iterator[dict | None]:
    def vs_none(arm: str, task: str, near: bool) -> dict | None:
        a, none = _cell(doc, arm, task), _cell(doc, "none", task)
        if a is None or none is None:
            return None
        gap = a["median"] - none["median"]
        holds = abs(gap) <= NEAR_CHANCE_POINTS if near else gap > NEAR_CHANCE_POINTS
        how = "near chance" if near else "well above chance"
        bound = "within" if near else "more than"
        relation = "of" if near else "above"
        return {
            "claim": f"the {arm} model is {how} on {task} pairs ({bound} {NEAR_CHANCE_POINTS:g} "
            f"points {relation} the fresh head of the model pretrained without a pair loss)",
            "holds": bool(holds),
            "detail": f"{a['median']:.2f} vs {none['median']:.2f} ({gap:+.2f})",
        }

    yield vs_none("NSP", "nsp", near=False)
    yield vs_none("NSP", "sop", near=True)
    yield vs_none("SOP", "sop", near=False)
    yield vs_none("SOP", "nsp", near=False)


def _table6(doc: dict) -> Iterator[dict | None]:
    """Perplexity falls as the model grows: arms ordered by encoder parameters (12 L H^2)."""
    sized = sorted((stack_size(arm), arm, row["mlm_ppl"]["median"])
                   for arm, row in doc["arms"].items() if "mlm_ppl" in row)  # fmt: skip
    if len(sized) < 2:
        return
    steps = zip(sized, sized[1:], strict=False)
    rises = [f"{a} -> {b}" for (_, a, pa), (_, b, pb) in steps if pb >= pa]
    yield {
        "claim": "held-out masked-LM perplexity falls with every step up in encoder parameters",
        "holds": not rises,
        "detail": " > ".join(f"{p:.1f}" for _, _, p in sized)
        + (f"; not falling at {', '.join(rises)}" if rises else ""),
    }


def _table8(doc: dict) -> Iterator[dict | None]:
    """The paper's mixes lie within 0.8 (MNLI), 0.5 (NER) and 0.9 (feature-based NER) points:
    here, within 3x the largest seed std of the mixes."""
    yield from _over_random_init(doc)
    mixes = [a for a in doc["arms"] if a.count("/") == 2]
    tasks = dict.fromkeys(t for a in mixes for t in doc["arms"][a])
    for task in tasks:
        cells = [c for a in mixes if (c := _cell(doc, a, task)) is not None]
        if len(cells) < 2:
            continue
        spread = max(c["median"] for c in cells) - min(c["median"] for c in cells)
        std = max(c["std"] for c in cells)
        yield {
            "claim": f"the masking mixes agree on {task} (spread within 3x the largest seed std)",
            "holds": bool(spread <= 3 * std),
            "detail": f"spread {spread:.2f} over {len(cells)} mixes, largest std {std:.2f}",
        }


def _electra(doc: dict) -> Iterator[dict | None]:
    yield from _over_random_init(doc)
    for task in next(iter(doc["arms"].values()), {}):
        claim = f"ELECTRA beats BERT (MLM) on {task}"
        yield _beats(doc, "ELECTRA", "BERT (MLM)", task, claim, by_std=False)


_BY_TABLE = {"5": _table5, "fig5": _fig5, "nsp_sop": _nsp_sop, "6": _table6, "8": _table8,
             "electra": _electra}  # fmt: skip


def check(doc: dict) -> list[dict]:
    """[{"claim", "holds", "detail"}] for the table document `doc` (report.write's)."""
    table = doc["table"]
    found = _BY_TABLE[table](doc) if table in _BY_TABLE else iter(())
    return [c for c in found if c is not None]
