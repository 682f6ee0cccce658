"""The A/A test of an interval: two arms drawn from one distribution, scored as a table scores
them, and how often the interval still calls one ahead (a false "holds" or "reversed"). A
calibrated 95% interval errs at most 5% of the time.

    rate = false_verdict_rate("welch", pretrain_seeds=2, finetune_seeds=3, spread=2.6, sims=2000)

One simulated table: a dev set of `examples` items, each with its own chance of being answered
right (Beta(4, 1): mean 0.8, some items hard); each arm has `pretrain_seeds` pretraining runs,
each shifting every item's chance by one normal draw of sd `spread` points, and each of those
`finetune_seeds` fine-tuning runs shifting it again by sd `finetune_spread`; a run answers each
item right with its chance. Both arms come from the same distribution, so any verdict is false.
The grid over spreads and seed counts is experiments/ablations/aa_grid.py.

A sweep that adds seeds until a comparison resolves reads it more than once, and each reading
is another chance of a false verdict: `looks_p_values` reads one A/A table at a growing series
of designs (its runs kept from look to look), so the error over all the looks, and the level
each look needs for that error to stay at 5%, can be measured (experiments/ablations/aa_looks.py).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as scipy_stats

from bert_jax.ablations import interval, stats

METHODS = ("welch", "bootstrap")


def simulate_arm(
    rng: np.random.Generator, chance_N: np.ndarray, pretrain_seeds: int, finetune_seeds: int,
    spread: float, finetune_spread: float, shifts: np.ndarray | None = None,
    item_spread: float = 0.0,
) -> tuple[list[np.ndarray], list[int]]:  # fmt: skip
    """One arm's runs (N x 1 rows of right answers, as stats.example_rows gives accuracy) and
    each run's pretraining run. `shifts`: each pretraining run's shift drawn from these points
    instead of a normal of sd `spread` (a skewed spread, as measured). `item_spread`: the arm's
    own shift of each item's chance (sd, points), the same in all its runs: what this arm's
    model finds easy or hard that the other's does not, drawn afresh for each arm and table so
    the arms stay equal over the population of items; only that puts weight on the interval's
    examples term, which the dev set's sampling would move."""
    if item_spread:
        chance_N = chance_N + rng.normal(0.0, item_spread / 100, size=len(chance_N))
    runs, groups = [], []
    for g in range(pretrain_seeds):
        shift = rng.normal(0.0, spread / 100) if shifts is None else rng.choice(shifts) / 100
        for _ in range(finetune_seeds):
            chance = np.clip(chance_N + shift + rng.normal(0.0, finetune_spread / 100), 0, 1)
            runs.append((rng.random(len(chance_N)) < chance).astype(np.float64)[:, None])
            groups.append(g)
    return runs, groups


def judge(method: str, a: tuple, b: tuple, draws: int) -> dict:
    """The interval of A - B by `method` (`a`, `b`: runs and groups)."""
    if method == "welch":
        return interval.difference(a[0], b[0], "sst2", groups_a=a[1], groups_b=b[1])
    if method == "bootstrap":
        return stats.two_level_bootstrap(a[0], b[0], "sst2", draws=draws,
                                         groups_a=a[1], groups_b=b[1])  # fmt: skip
    raise ValueError(f"method {method!r}: one of {METHODS}")


def false_verdict_rate(
    method: str, pretrain_seeds: int, finetune_seeds: int, spread: float, sims: int,
    examples: int = 2000, finetune_spread: float = 1.0, seed: int = 0, draws: int = 1000,
    pretrain_seeds_b: int | None = None, spread_b: float | None = None, item_spread: float = 0.0,
) -> float:  # fmt: skip
    """The share of `sims` A/A tables whose interval lies wholly above or below 0. Arm B may
    have other pretraining seeds (`pretrain_seeds_b`) or another spread between its runs
    (`spread_b`: equal means, unequal spreads, as MLM's runs and LTR's on conll); None: A's.
    `item_spread`: each arm's own item shifts (simulate_arm), 0 for none."""
    rng = np.random.default_rng(seed)
    seeds_b = pretrain_seeds if pretrain_seeds_b is None else pretrain_seeds_b
    spreads = (spread, spread if spread_b is None else spread_b)
    wrong = 0
    for _ in range(sims):
        chance_N = rng.beta(4.0, 1.0, size=examples)
        a, b = (simulate_arm(rng, chance_N, g, finetune_seeds, s, finetune_spread,
                             item_spread=item_spread)
                for g, s in zip((pretrain_seeds, seeds_b), spreads, strict=True))  # fmt: skip
        d = judge(method, a, b, draws)
        wrong += d["low"] > 0 or d["high"] < 0
    return wrong / sims


def p_value(d: dict) -> float:
    """The two-sided p-value of `interval.difference`'s result: the level at which its
    interval would just reach 0 (1.0 where it is unbounded: one run in an arm)."""
    if not (math.isfinite(d["low"]) and math.isfinite(d["high"])):
        return 1.0
    half = (d["high"] - d["low"]) / 2
    if half <= 0:
        return 1.0 if d["diff"] == 0 else 0.0
    se = half / float(scipy_stats.t.ppf(0.975, d["df"]))
    return float(2 * scipy_stats.t.sf(abs(d["diff"]) / se, d["df"]))


def looks_p_values(
    looks: list[tuple[int, int]], finetune_seeds: int, spread: float, sims: int,
    spread_b: float | None = None, shifts_a: np.ndarray | None = None, examples: int = 2000,
    finetune_spread: float = 1.0, seed: int = 0, b_fixed: bool = False,
) -> np.ndarray:  # fmt: skip
    """sims x len(looks) p-values of A/A tables each read at every design of `looks`: look k
    judges arm A's first looks[k][0] pretraining runs against B's first looks[k][1], the runs
    of earlier looks kept, as a sweep that adds seeds keeps them. Arm A's pretraining runs
    shift by a normal of sd `spread` points, or by draws from `shifts_a` (centred here, so the
    arms' means stay equal); B's by a normal of sd `spread_b` (None: `spread`). `b_fixed`: B
    is one fixed answer of A's expected score (the best constant), its looks' counts unread."""
    most_a, most_b = max(a for a, _ in looks), max(b for _, b in looks)
    centred = None if shifts_a is None else np.asarray(shifts_a, float) - np.mean(shifts_a)
    p_SxK = np.ones((sims, len(looks)))
    for s in range(sims):
        # One stream per table and arm, drawn run by run: a table's first runs are the same
        # whatever the series' last design, so a longer series only adds looks to each table.
        rng, rng_a, rng_b = (np.random.default_rng([seed, s, k]) for k in range(3))
        chance_N = rng.beta(4.0, 1.0, size=examples)
        a = simulate_arm(rng_a, chance_N, most_a, finetune_seeds, spread, finetune_spread, centred)
        if b_fixed:
            b = ([(rng_b.random(examples) < chance_N).astype(np.float64)[:, None]], None)
        else:
            b = simulate_arm(rng_b, chance_N, most_b, finetune_seeds,
                             spread if spread_b is None else spread_b, finetune_spread)  # fmt: skip
        for k, (g_a, g_b) in enumerate(looks):
            n_a, n_b = g_a * finetune_seeds, (1 if b_fixed else g_b * finetune_seeds)
            d = interval.difference(a[0][:n_a], b[0][:n_b], "sst2", groups_a=a[1][:n_a],
                                    groups_b=None if b_fixed else b[1][:n_b])  # fmt: skip
            p_SxK[s, k] = p_value(d)
    return p_SxK


def looks_error(p_SxK: np.ndarray, alpha: float = 0.05, draws: int = 1000) -> dict:
    """What `looks_p_values` says: the false-verdict rate at the last look alone, at any look
    (reading every look at `alpha`), the level each look must be read at for the rate over
    all of them to be `alpha` (a constant level, as Pocock's), and that level's 95% Monte
    Carlo interval (the tables resampled `draws` times): a p-value inside it is on the line."""
    first_p_S = p_SxK.min(axis=1)
    rng = np.random.default_rng(0)
    resampled = rng.choice(first_p_S, size=(draws, len(first_p_S)))
    levels = np.quantile(resampled, alpha, axis=1)
    return {
        "last_look": float(np.mean(p_SxK[:, -1] < alpha)),
        "any_look": float(np.mean(first_p_S < alpha)),
        "level_per_look": float(np.quantile(first_p_S, alpha)),
        "level_per_look_mc": [float(np.quantile(levels, 0.025)), float(np.quantile(levels, 0.975))],
    }
