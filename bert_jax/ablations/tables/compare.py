"""The comparisons the tables' claims are made of: one arm ahead of another on a task, every
pretrained arm ahead of random init (or of the best constant answer, where random init scores
below it).

A document with per-example intervals (`doc["intervals"]`, written by bert_jax.ablations.run)
judges a comparison by the calibrated 95% interval of the difference (bert_jax.ablations.
interval): *holds* above 0, *reversed* below, *unresolved at this scale* when it covers 0 or is
wider than the paper's own effect (bert_jax.ablations.stats.verdict); a verdict also gives the
measured effect as a share of the paper's. Without them (documents written before intervals
existed) the old rule stands: ahead by more than 3x the larger seed std of the two cells; a cell
of one seed has no std, and its detail says so."""

from __future__ import annotations

from collections.abc import Iterator

from bert_jax.ablations import stats
from bert_jax.ablations.interval import FIXED, ONE_RUN, runs_to_resolve
from bert_jax.ablations.tables.base import Claim

RANDOM_INIT = "random init"  # the arm of an untrained model, in every table that has one


def cell(doc: dict, arm: str, task: str) -> dict | None:
    """The summary ({"median", "std", "n", "paper"}) of `arm` on `task`, if the table has it."""
    return doc["arms"].get(arm, {}).get(task)


def pair_key(a: str, b: str) -> str:
    return f"{a} - {b}"


def interval(doc: dict, a: str, b: str, task: str) -> dict | None:
    """`a` minus `b` on `task` with its 95% interval, from either order stored; None if absent."""
    by_pair = doc.get("intervals", {}).get(task, {})
    if (d := by_pair.get(pair_key(a, b))) is not None:
        return d
    if (d := by_pair.get(pair_key(b, a))) is not None:
        turned = {k: d[k][::-1] for k in PER_ARM if k in d}  # each arm's field, a's first
        return {**d, **turned, "diff": -d["diff"], "low": _negated(d["high"]),
                "high": _negated(d["low"])}  # fmt: skip
    return None


# An interval's fields that hold one entry per arm, in the stored order (interval.py).
PER_ARM = ("runs", "units", "unit_kinds", "spreads", "means")


def _negated(bound: float | None) -> float | None:
    """A bound of the turned-round difference (None: an arm had no spread, no interval)."""
    return None if bound is None else -bound


def paper_effect(a: dict, b: dict) -> float | None:
    if a.get("paper") is None or b.get("paper") is None:
        return None
    return float(a["paper"]) - float(b["paper"])


def levels(d: dict, medians: str) -> str:
    """The two levels an interval's difference is of, as the claim's detail opens: the arms'
    means over their runs (what `d` subtracts; the table's cells are medians) where `d`
    records them (since 2026-11-30), else `medians`."""
    if "means" not in d:
        return f"{medians}: "
    return f"means {d['means'][0]:.2f} vs {d['means'][1]:.2f}: "


def judged(
    claim: str, d: dict, effect: float | None, prefix: str, verdict: str | None = None
) -> Claim:
    """A claim judged by the interval `d` of (the claimed winner - the other): by
    stats.verdict, unless the claim brings its own `verdict` of that interval."""
    verdict = verdict or stats.verdict(d, effect)
    detail = (f"{prefix}difference {d['diff']:+.2f}, 95% interval [{d['low']:+.2f}, "
              f"{d['high']:+.2f}] over {d['examples']} examples and {_units(d)}")  # fmt: skip
    if verdict == stats.UNRESOLVED and (kind := _growing_kind(d)) is not None:
        runs = runs_to_resolve(d, effect)
        detail += (f"; at the measured spreads about {runs} {kind} an arm would resolve a "
                   "difference this size" if runs else
                   f"; at the measured spreads 20 {kind} an arm would not resolve it")
    out = {"claim": claim, "holds": verdict == stats.HOLDS, "verdict": verdict,
           "interval": [d["low"], d["high"]], "detail": detail}  # fmt: skip
    if effect is not None:
        size = size_against_paper(d["diff"], effect)
        detail += f"; the paper's effect {effect:+.1f}"
        if verdict in (stats.HOLDS, stats.REVERSED) and size is not None:
            detail += f", measured {size:.2f}x of it"
            out["size_against_paper"] = size
        out["detail"] = detail
    return out


def _growing_kind(d: dict) -> str | None:
    """What more of would narrow `d`'s interval ("pretraining runs"), when its arms' spreads
    were measured (documents since 2026-11-30); None for a fixed answer against one run."""
    if "spreads" not in d:
        return None
    kinds = [k for k in d["unit_kinds"] if k != FIXED]
    if not kinds or ONE_RUN in kinds:
        return None
    return kinds[0] if len(set(kinds)) == 1 else "runs"


def _units(d: dict) -> str:
    """What the interval was computed over: "2 vs 2 pretraining runs (Welch t, 1.9 df)"; older
    documents (the bootstrap) name the runs."""
    if "units" not in d:
        return f"{d['runs'][0]} x {d['runs'][1]} runs"
    arms = [(u, k) for u, k in zip(d["units"], d["unit_kinds"], strict=True)
            if k != FIXED]  # fmt: skip
    if any(k == ONE_RUN for _, k in arms):
        return "one run of an arm (no spread to measure: no interval)"
    if len({k for _, k in arms}) == 1:
        text = " vs ".join(str(u) for u, _ in arms) + f" {arms[0][1]}"
    else:
        text = " vs ".join(f"{u} {k}" for u, k in arms)
    return f"{text} (Welch t, {d['df']:.1f} df)"


def size_against_paper(diff: float, effect: float) -> float | None:
    """The measured difference as a share of the paper's (1.0: the paper's size; 0.33: a third
    of it); None when the paper's effect is 0."""
    return diff / effect if effect else None


NOT_USED = "not used: the task is uncalibrated"


def not_used(doc: dict, task: str, claim: str) -> Claim:
    """The claim set aside when the workdir's calibration table found `task`'s ceiling too
    close to its floor (tables/calibration.py); else None."""
    if task.removesuffix("_feature") not in doc.get("uncalibrated", ()):
        return None
    why = (f"{task}: the pretrained ceiling is too close to random init at this budget for "
           "the task to show pretraining's effects (calibration.md)")
    return {"claim": claim, "holds": False, "verdict": NOT_USED, "detail": why}


def beats(doc: dict, winner: str, loser: str, task: str, claim: str, by_std: bool) -> Claim:
    """`winner` ahead of `loser` on `task`: by its interval when the document has one, else
    by the medians (by more than 3x the larger seed std if `by_std`)."""
    a, b = cell(doc, winner, task), cell(doc, loser, task)
    if a is None or b is None:
        return None
    by_interval = claim.removesuffix(" by more than 3x the seed std")  # the interval's wording
    if (unused := not_used(doc, task, by_interval)) is not None:
        return unused
    medians = f"{a['median']:.2f} vs {b['median']:.2f}"
    if (d := interval(doc, winner, loser, task)) is not None:
        return judged(by_interval, d, paper_effect(a, b), levels(d, medians))
    margin, std = a["median"] - b["median"], max(a["std"], b["std"])
    holds = margin > 3 * std if by_std else margin > 0
    detail = f"{medians} (margin {margin:+.2f}"
    if min(a["n"], b["n"]) < 2:
        detail += ", one seed: no std)"
    else:
        detail += f", larger std {std:.2f})"
    return {"claim": claim, "holds": bool(holds), "detail": detail}


def over_random_init(doc: dict) -> Iterator[Claim]:
    """Every other arm beats random init on each shared task: beats the higher of random init
    and the scored split's best constant answer (random init can sit below that constant, and
    beating it alone would not show learning)."""
    if RANDOM_INIT not in doc["arms"]:
        return
    for arm, row in doc["arms"].items():
        if arm == RANDOM_INIT:
            continue
        for task in row:
            if (floor := cell(doc, RANDOM_INIT, task)) is None:
                continue
            best = doc.get("baselines", {}).get(task, {}).get("best_constant")
            d = interval(doc, arm, stats.BEST_CONSTANT, task)
            if best is not None and best > floor["median"] and d is not None:
                claim = (f"{arm} beats random init on {task} (and the best constant answer, "
                         f"{best:.2f}, which random init scores below)")  # fmt: skip
                if (unused := not_used(doc, task, claim)) is not None:
                    yield unused
                    continue
                a = cell(doc, arm, task)
                yield judged(claim, d, paper_effect(a, floor),
                             levels(d, f"{a['median']:.2f} vs {best:.2f}"))  # fmt: skip
                continue
            claim = f"{arm} beats random init on {task} by more than 3x the seed std"
            yield beats(doc, arm, RANDOM_INIT, task, claim, by_std=True)
