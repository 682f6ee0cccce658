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
"""

from __future__ import annotations

import numpy as np

from bert_jax.ablations import interval, stats

METHODS = ("welch", "bootstrap")


def simulate_arm(
    rng: np.random.Generator, chance_N: np.ndarray, pretrain_seeds: int, finetune_seeds: int,
    spread: float, finetune_spread: float,
) -> tuple[list[np.ndarray], list[int]]:  # fmt: skip
    """One arm's runs (N x 1 rows of right answers, as stats.example_rows gives accuracy) and
    each run's pretraining run."""
    runs, groups = [], []
    for g in range(pretrain_seeds):
        shift = rng.normal(0.0, spread / 100)
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
    pretrain_seeds_b: int | None = None, spread_b: float | None = None,
) -> float:  # fmt: skip
    """The share of `sims` A/A tables whose interval lies wholly above or below 0. Arm B may
    have other pretraining seeds (`pretrain_seeds_b`) or another spread between its runs
    (`spread_b`: equal means, unequal spreads, as MLM's runs and LTR's on conll); None: A's."""
    rng = np.random.default_rng(seed)
    seeds_b = pretrain_seeds if pretrain_seeds_b is None else pretrain_seeds_b
    spreads = (spread, spread if spread_b is None else spread_b)
    wrong = 0
    for _ in range(sims):
        chance_N = rng.beta(4.0, 1.0, size=examples)
        a, b = (simulate_arm(rng, chance_N, g, finetune_seeds, s, finetune_spread)
                for g, s in zip((pretrain_seeds, seeds_b), spreads, strict=True))  # fmt: skip
        d = judge(method, a, b, draws)
        wrong += d["low"] > 0 or d["high"] < 0
    return wrong / sims
