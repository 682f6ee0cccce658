"""The 95% interval of one arm's score minus another's, calibrated so that two arms with the same
distribution are told apart at most 5% of the time (the A/A test, bert_jax.ablations.aa_test).

    d = difference([rows_a1, rows_a2, ...], [rows_b1, ...], "conll", groups_a=[0, 0, 1, 1], ...)
    d["diff"], d["low"], d["high"], d["df"]

The unit of replication is the pretraining run: an arm's score is the mean over its pretraining
runs of their mean fine-tuning score (`groups_*` name each run's pretraining run). The interval
is Welch's t over those unit means, with the scored examples' sampling added as a third variance
term (the paired difference's delta-method variance over the dev examples, which a new dev set
would move and the runs' spread does not show, since every run reads the same examples), the
degrees of freedom by Welch-Satterthwaite, at most the units' own (G_A - 1 + G_B - 1: with the
example term's hundreds of degrees of freedom added, Satterthwaite's can exceed what the units
hold, and equal arms of two runs each were then told apart 5.5% of the time), at most twice the
smaller arm's, and the smaller arm's own where its term dominates, the examples' included
(`_welch`: since 2026-11-30, for arms of unequal runs, as assembled tables have them). With two
pretraining runs an arm has one degree of freedom for its spread, so the interval is wide: that
is what two runs can say.

The two-level bootstrap it replaces (`stats.two_level_bootstrap`) resamples two pretraining runs
into three outcomes, cannot measure the spread between them, and said "holds" for equal arms 7-26%
of the time at 2 seeds (experiments/ablations/README.md, the A/A grid).

An arm whose runs share one pretraining run (a released checkpoint, or a table run with one
pretraining seed) has its fine-tuning runs as units: its interval is conditional on that one
pretraining run, and the result says so (`units`). One run in all has no spread to measure: its
run variance is unknown and the interval is unbounded (low -inf, high +inf in the json). Rows
given without groups (the best constant answer) are a fixed answer with no run variance.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as scipy_stats

from bert_jax.ablations.stats import ENTITY_F1, MASKED_LM_LOSS, headline, metric_of

# What an arm's units are (the json's `unit_kinds`).
PRETRAINING, FINE_TUNING, FIXED, ONE_RUN = (
    "pretraining runs", "fine-tuning runs of one pretraining run", "a fixed answer", "one run",
)  # fmt: skip


def _influence_RxN(metric: str, runs_RxNxK: np.ndarray) -> np.ndarray:
    """Each run's headline as the mean over examples of a per-example value, to first order
    (the delta method): exact for accuracy and mean F1; for entity F1 = 2 tp / (predicted +
    gold) and the masked-LM loss (summed loss / predictions), their linearisation around the
    run's totals."""
    n = runs_RxNxK.shape[1]
    if metric == MASKED_LM_LOSS:  # loss / predictions: a ratio, linearised as entity F1's
        loss, count = runs_RxNxK[..., 0], runs_RxNxK[..., 1]
        total_R = np.maximum(count.sum(1), 1e-12)
        mean_R = loss.sum(1) / total_R
        return mean_R[:, None] + n * (loss - mean_R[:, None] * count) / total_R[:, None]
    if metric != ENTITY_F1:
        return 100.0 * runs_RxNxK[..., 0]
    tp, spans = runs_RxNxK[..., 0], runs_RxNxK[..., 1] + runs_RxNxK[..., 2]
    total_R = np.maximum(spans.sum(1), 1e-12)
    f1_R = 100.0 * 2.0 * tp.sum(1) / total_R
    return f1_R[:, None] + n * (200.0 * tp - f1_R[:, None] * spans) / total_R[:, None]


def _arm(runs: list[np.ndarray], groups: list[int] | None, metric: str):
    """(score, per-example influence N, unit means, what the units are, the units' item noise:
    the mean over examples of the variance between units of their centred influence)."""
    n = len(runs[0])
    stacked = np.stack(runs).astype(np.float64)
    scores_R = np.array([headline(metric, r.sum(0), n) for r in stacked], np.float64)
    influence_RxN = _influence_RxN(metric, stacked)
    if groups is None:
        keys, what = list(range(len(runs))), FIXED
    elif len(set(groups)) > 1:
        keys, what = list(groups), PRETRAINING
    else:
        keys, what = list(range(len(runs))), (FINE_TUNING if len(runs) > 1 else ONE_RUN)
    members = [np.flatnonzero(np.asarray(keys) == k) for k in dict.fromkeys(keys)]
    units = np.array([scores_R[m].mean() for m in members])
    influence_UxN = np.stack([influence_RxN[m].mean(0) for m in members])
    noise = 0.0
    if what != FIXED and len(members) > 1:
        centred_UxN = influence_UxN - influence_UxN.mean(1, keepdims=True)
        noise = float(np.var(centred_UxN, axis=0, ddof=1).mean()) / len(members)
    return float(units.mean()), influence_UxN.mean(0), units, what, noise


def _welch(parts: list[tuple[float, float]]) -> tuple[float, float]:
    """The 95% half-width and degrees of freedom of a sum of variance terms [(variance, df)],
    the examples' term first, then each arm's (one or two). Welch-Satterthwaite's df, at most
    the units' own (the example term's many would lift it past what the runs hold) and at most
    twice the smaller arm's (what a balanced design of that many runs would hold); and where
    the arm with fewer runs has the largest term, at most that arm's own df. Satterthwaite's df
    comes from the runs' own spreads, and with few runs behind the dominant term it errs high:
    equal arms of 2 and 6 pretraining runs were told apart 8% of the time, 3 runs of spread
    6.3 against 6 of 0.8 (equal means) 7.3% (aa_grid.py --unequal). Largest of all, the
    examples' included (since 2026-12-03): where the examples' term dominates, the runs' few
    df do not carry the interval, and comparing with the other arm's alone made a third run of
    the steadier arm widen the interval threefold (t 12.7 for 4.3: the ELECTRA table's squad)."""
    variance = sum(v for v, _ in parts)
    denominator = sum(v * v / df for v, df in parts if df > 0 and v > 0)
    df = variance * variance / denominator if denominator > 0 else math.inf
    if arms := parts[1:]:
        own = [d for _, d in arms]
        df = min(df, sum(own), 2 * min(own))
        fewer = min(arms, key=lambda a: a[1])
        if len(set(own)) > 1 and fewer[0] >= max(v for v, _ in parts):
            df = min(df, fewer[1])
    half = float(scipy_stats.t.ppf(0.975, df)) * math.sqrt(variance) if variance else 0.0
    return half, df


def difference(
    runs_a: list[np.ndarray],
    runs_b: list[np.ndarray],
    kind: str,
    groups_a: list[int] | None = None,
    groups_b: list[int] | None = None,
) -> dict:
    """Arm A minus arm B with its calibrated 95% interval. Every run's rows must be the same N
    examples in order (stats.example_rows). `groups_*`: each run's pretraining run (None: the
    rows are a fixed answer, such as the best constant, with no run variance)."""
    metric = metric_of(kind)
    n = len(runs_a[0])
    if any(len(r) != n for r in (*runs_a, *runs_b)):
        raise ValueError(f"{kind}: runs scored on different numbers of examples")
    a, infl_a, units_a, what_a, noise_a = _arm(runs_a, groups_a, metric)
    b, infl_b, units_b, what_b, noise_b = _arm(runs_b, groups_b, metric)
    # The examples' term: the spread over examples of the two arms' difference, less what the
    # units' own item-level noise puts into it (that noise is in the units' spread already).
    d_N = infl_a - infl_b
    items = float(np.var(d_N, ddof=1)) - noise_a - noise_b if n > 1 else 0.0
    parts = [(max(items, 0.0) / n, n - 1)]  # (variance, df)
    unbounded = False
    for units, what in ((units_a, what_a), (units_b, what_b)):
        if what == FIXED:
            continue
        if len(units) < 2:
            unbounded = True  # one run: its spread is unknown
            continue
        parts.append((float(np.var(units, ddof=1)) / len(units), len(units) - 1))
    half, df = _welch(parts)
    diff = a - b
    spreads = [float(np.std(u, ddof=1)) if w != FIXED and len(u) > 1 else None
               for u, w in ((units_a, what_a), (units_b, what_b))]  # fmt: skip
    if unbounded:
        low, high, df = -math.inf, math.inf, 0.0
    else:
        low, high = diff - half, diff + half
    return {
        "diff": diff, "low": low, "high": high, "examples": n,
        "runs": [len(runs_a), len(runs_b)], "units": [len(units_a), len(units_b)],
        "unit_kinds": [what_a, what_b], "df": df, "method": "welch",
        "spreads": spreads, "examples_variance": parts[0][0], "means": [a, b],
    }  # fmt: skip


def half_width(d: dict, runs: int) -> float | None:
    """The half-width `d`'s interval would have with `runs` units in each arm that has a
    spread (a fixed answer stays one), if the arms' spreads and the examples' term stayed as
    measured; None when an arm's spread is unknown (one run) or not recorded (before
    2026-11-30)."""
    if "spreads" not in d or runs < 2:
        return None
    kinds = d["unit_kinds"]
    if any(s is None and k != FIXED for s, k in zip(d["spreads"], kinds, strict=True)):
        return None
    parts = [(d["examples_variance"], d["examples"] - 1)]
    parts += [(s * s / runs, runs - 1) for s, k in zip(d["spreads"], kinds, strict=True)
              if k != FIXED]  # fmt: skip
    return _welch(parts)[0]


def runs_to_resolve(d: dict, paper_effect: float | None = None, most: int = 20) -> int | None:
    """The fewest units an arm (from the most either has now) whose interval, at the measured
    spreads, would leave out 0 for a difference of the measured size, and be no wider than the
    paper's effect when one is given (stats.verdict's two rules): how many pretraining runs an
    unresolved comparison is likely to need. None when `most` would not do, or the spreads are
    unknown."""
    for runs in range(max(*d["units"], 2), most + 1):
        half = half_width(d, runs)
        if half is None:
            return None
        if half < abs(d["diff"]) and (paper_effect is None or 2 * half <= abs(paper_effect)):
            return runs
    return None
