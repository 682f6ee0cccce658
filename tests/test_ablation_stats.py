"""The ablations' statistics: per-example rows reproduce the official scores, the best constant
answer is the best on the scored split, the calibrated interval has the width the normal
approximation gives and passes the A/A test, and claims read their verdicts (holds, reversed,
unresolved) off it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bert_jax.ablations import aa_test, claims, interval, report, stats
from bert_jax.ablations.tables.compare import pair_key


def _runs(rate: float, n: int, runs: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.random((n, 1)) < rate).astype(float) for _ in range(runs)]


def test_interval_width_and_verdicts():
    n = 2000
    a, b = _runs(0.7, n, 1, 1), _runs(0.5, n, 1, 2)
    # Two fixed answers (no run variance): only the examples' term, the normal approximation's
    # standard error of a difference of independent outcomes.
    d = interval.difference(a, b, "sst2")
    pa, pb = a[0].mean(), b[0].mean()
    se = 100 * np.sqrt(pa * (1 - pa) / n + pb * (1 - pb) / n)
    assert d["diff"] == pytest.approx(100 * (pa - pb))
    assert d["high"] - d["low"] == pytest.approx(2 * 1.96 * se, rel=0.03)
    assert stats.verdict(d) == stats.HOLDS
    assert stats.verdict(interval.difference(b, a, "sst2")) == stats.REVERSED
    same = interval.difference(a, [a[0].copy()], "sst2")
    assert same["low"] == same["high"] == 0.0 and stats.verdict(same) == stats.UNRESOLVED
    # An interval wider than the paper's own effect cannot tell that effect from none.
    assert stats.verdict(d, paper_effect=0.5) == stats.UNRESOLVED
    # Pairing: arms right on the same examples but for 40 of them differ by exactly those.
    c = [a[0].copy()]
    c[0][:40] = 1 - c[0][:40]
    paired = interval.difference(a, c, "sst2")
    assert paired["high"] - paired["low"] < 0.5 * (d["high"] - d["low"])
    # One run of an arm trained by us: its spread is unknown, the interval unbounded.
    one = interval.difference(a, b, "sst2", groups_a=[0], groups_b=[0])
    assert (one["low"], one["high"]) == (-math.inf, math.inf)
    assert stats.verdict(one) == stats.UNRESOLVED
    # Pretraining runs are the units: three fine-tunings of each of two pretraining runs that
    # disagree are two draws of pretraining (one degree of freedom), not six.
    two = [r for seed, rate in ((5, 0.7), (6, 0.55)) for r in _runs(rate, n, 3, seed)]
    flat = interval.difference(two, b, "sst2", groups_a=[0] * 6)  # six fine-tuning units
    nested = interval.difference(two, b, "sst2", groups_a=[0, 0, 0, 1, 1, 1])
    assert nested["diff"] == pytest.approx(flat["diff"])
    assert (nested["units"], nested["df"]) == ([2, 1], 1.0)
    assert nested["high"] - nested["low"] > 3 * (flat["high"] - flat["low"])
    assert nested["low"] < 100 * (0.55 - 0.5) + 1.5 < 100 * (0.7 - 0.5) - 1.5 < nested["high"]
    # Projected to more pretraining runs at the measured spreads: at the runs it has, the
    # interval's own half-width; narrower with more; the runs that would leave out 0.
    four = [r for seed, rate in enumerate((0.62, 0.55, 0.6, 0.5)) for r in _runs(rate, n, 2, seed)]
    three = [r for seed, rate in enumerate((0.5, 0.56, 0.47), 10) for r in _runs(rate, n, 2, seed)]
    d = interval.difference(four, three, "sst2", [0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 1, 1, 2, 2])
    assert d["units"] == [4, 3] and stats.verdict(d) == stats.UNRESOLVED
    even = interval.difference(four[:6], three, "sst2", [0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, 2])
    assert interval.half_width(even, 3) == pytest.approx((even["high"] - even["low"]) / 2)
    widths = [interval.half_width(d, g) for g in (4, 6, 10)]
    assert widths == sorted(widths, reverse=True) and widths[-1] > 0
    need = interval.runs_to_resolve(d)
    assert need is not None and 4 < need <= 20
    assert interval.half_width(d, need) < abs(d["diff"]) <= interval.half_width(d, need - 1)
    assert interval.runs_to_resolve(d, paper_effect=0.1) is None  # never as narrow as that
    assert interval.half_width(one, 5) is None and interval.runs_to_resolve(one) is None


def test_entity_f1_examples_term_matches_the_bootstrap():
    """The delta method's variance of entity F1 over examples (interval._influence_RxN) against
    a direct bootstrap of the same rows."""
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 4, size=(600, 1)).astype(float)
    pred = np.clip(gold + rng.integers(-1, 2, size=(600, 1)), 0, None)
    rows = np.concatenate([np.minimum(gold, pred), pred, gold], axis=1)
    d = interval.difference([rows], [np.zeros_like(rows)], "conll")  # B scores 0 everywhere
    weights = rng.multinomial(600, np.full(600, 1 / 600), size=4000).astype(float)
    boot = stats.headline(stats.ENTITY_F1, weights @ rows, 600)
    half = (d["high"] - d["low"]) / 2
    assert half == pytest.approx(1.96 * boot.std(), rel=0.08)


def test_aa_false_verdicts_at_most_five_percent():
    """The A/A test: equal arms, pretraining-run spreads up to 10 points, 2 to 6 pretraining
    seeds, 1 to 3 fine-tuning seeds. The interval errs at most 5% (+ the Monte Carlo error of
    1500 tables); the bootstrap it replaced errs far more often at two pretraining seeds."""
    cells = [(2, 1, 10.0), (2, 3, 2.6), (4, 2, 5.2), (6, 1, 1.3), (3, 3, 0.0)]
    for pretrain, finetune, spread in cells:
        rate = aa_test.false_verdict_rate("welch", pretrain, finetune, spread, sims=1500,
                                          examples=300, seed=pretrain)  # fmt: skip
        assert rate <= 0.05 + 0.017, (pretrain, finetune, spread, rate)
    old = aa_test.false_verdict_rate("bootstrap", 2, 3, 10.0, sims=300, examples=300, draws=400)
    assert old > 0.10
    # Unequal arms, as assembled tables have them: 6 pretraining runs against 3, and equal
    # means with unequal spreads (MLM's runs against LTR's on conll; and the fewer runs the
    # wider, where a pooled variance would err most).
    for seeds_b, spread, spread_b in ((3, 5.2, 5.2), (3, 6.3, 0.8), (6, 6.3, 0.8)):
        rate = aa_test.false_verdict_rate("welch", 6 if seeds_b == 3 else 3, 2, spread,
                                          sims=1500, examples=300, seed=seeds_b,
                                          pretrain_seeds_b=seeds_b, spread_b=spread_b)  # fmt: skip
        assert rate <= 0.05 + 0.017, (seeds_b, spread, spread_b, rate)
    # Arms equal over the population of items but not item by item (each its own item shifts),
    # which puts weight on the examples' term, as two models' rows do.
    for seeds_a, seeds_b, spread in ((2, 3, 2.6), (2, 6, 1.0), (3, 3, 5.2)):
        rate = aa_test.false_verdict_rate("welch", seeds_a, 2, spread, sims=1500, examples=300,
                                          seed=seeds_b, pretrain_seeds_b=seeds_b,
                                          item_spread=25.0)  # fmt: skip
        assert rate <= 0.05 + 0.017, (seeds_a, seeds_b, spread, rate)


def test_a_steadier_arms_third_run_does_not_widen_the_interval():
    """2 pretraining runs against 2, then against 3 of the steadier arm, the examples' term the
    largest (as the ELECTRA table's squad, masked LM against random init): the df stays the
    balanced design's 2, not the fewer-runs arm's 1 (t 12.7), which tripled the interval."""
    examples, masked_lm, random_init = (0.33, 1999), (0.068, 1), (0.004, 2)
    assert interval._welch([examples, masked_lm, random_init])[1] == 2
    # Where the fewer-runs arm's term is the largest, its own df still rules.
    assert interval._welch([(0.05, 1999), (0.4, 1), (0.004, 2)])[1] == 1
    # Simulated rows where it happens: the masked LM's 2 runs (spread 0.53) against 3 of a
    # steadier arm (0.50), the examples' term (0.36) above both arms'.
    rng = np.random.default_rng(2)
    chance_N = rng.beta(4.0, 1.0, size=2000)
    a = aa_test.simulate_arm(rng, chance_N, 2, 2, 0.8, 1.0, item_spread=25.0)
    b = aa_test.simulate_arm(rng, chance_N, 3, 2, 0.1, 1.0, item_spread=25.0)
    two = interval.difference(a[0], b[0][:4], "sst2", groups_a=a[1], groups_b=b[1][:4])
    three = interval.difference(a[0], b[0], "sst2", groups_a=a[1], groups_b=b[1])
    assert three["df"] >= 2 and two["df"] >= 2, (two["df"], three["df"])
    width = lambda d: d["high"] - d["low"]  # noqa: E731
    assert width(three) <= 1.2 * width(two), (width(two), width(three))


def test_entity_rows_give_seqeval_micro_f1():
    from bert_jax.tasks import ner

    rng = np.random.default_rng(0)
    gold, pred, lines = [], [], []
    for _ in range(60):
        length = int(rng.integers(3, 12))
        g = list(rng.choice(ner.LABELS, length))
        p = [t if rng.random() < 0.7 else str(rng.choice(ner.LABELS)) for t in g]
        gold.append(g)
        pred.append(p)
        lines += [f"w{i} {x} {y}" for i, (x, y) in enumerate(zip(g, p, strict=True))] + [""]
    rows = stats._entity_rows("\n".join(lines) + "\n")
    ours = stats.headline(stats.ENTITY_F1, rows.sum(0), len(rows))
    assert ours == pytest.approx(100 * ner.entity_f1(gold, pred)["f1"])


def test_best_constant_is_the_scored_splits(tmp_path):
    from bert_jax.ablations import suite
    from bert_jax.corpus import embedded

    docs = list(embedded.iter_documents(max_documents=400))
    suite.build_suite(docs, str(tmp_path), train_examples=60, dev_examples=40)
    for kind in ("sst2", "mrpc", "conll", "squad"):
        best = stats.best_constant(kind, str(tmp_path / kind))
        majority = stats.majority_baseline(str(tmp_path / kind), kind)
        assert 0.0 <= majority <= best["score"] + 1e-9, kind
        # its answer scored example by example, as an arm's run, sums to the same score
        rows = stats.constant_rows(kind, str(tmp_path / kind), best["answer"])
        score = stats.headline(stats.metric_of(kind), rows.sum(0), len(rows))
        assert score == pytest.approx(best["score"]), kind
    from bert_jax.tasks import glue

    spec = glue.get_spec("sst2")
    dev = [str(ex.label) for ex in glue.read_split(spec, str(tmp_path / "sst2"), "dev")]
    best = stats.best_constant("sst2", str(tmp_path / "sst2"))
    assert best["score"] == pytest.approx(100 * max(dev.count(x) for x in set(dev)) / len(dev))


def _doc(table: str, cells: dict, intervals: dict) -> dict:
    arms = {a: {t: report.summarize(v, None) for t, v in row.items()} for a, row in cells.items()}
    return {"table": table, "arms": arms, "intervals": intervals}


def _d(low: float, high: float) -> dict:
    return {"diff": (low + high) / 2, "low": low, "high": high, "examples": 2000, "runs": [6, 6]}


def test_claims_read_verdicts_off_the_intervals():
    cells = {a: {"mrpc": [60.0], "conll": [10.0]}
             for a in ("No NSP", "LTR & No NSP", "random init")}  # fmt: skip
    doc = _doc("5", cells, {
        "mrpc": {pair_key("No NSP", "LTR & No NSP"): _d(1.0, 4.0),
                 pair_key("random init", "No NSP"): _d(-9.0, -5.0)},
        "conll": {pair_key("No NSP", "LTR & No NSP"): _d(-4.0, -1.0)},
    })  # fmt: skip
    got = {c["claim"]: c for c in claims.check(doc)}
    assert got["MLM (No NSP) beats LTR & No NSP on mrpc"]["verdict"] == stats.HOLDS
    assert got["MLM (No NSP) beats LTR & No NSP on conll"]["verdict"] == stats.REVERSED
    flipped = got["No NSP beats random init on mrpc"]  # stored as random init - No NSP
    assert flipped["verdict"] == stats.HOLDS and flipped["interval"] == [5.0, 9.0]
    # No interval for the pair: the old rule on the medians, without a verdict.
    old_rule = "LTR & No NSP beats random init on mrpc by more than 3x the seed std"
    assert "verdict" not in got[old_rule]
    mixes = _doc("8", {"80/10/10": {"mrpc": [58.0]}, "100/0/0": {"mrpc": [57.5]}},
                 {"mrpc": {pair_key("80/10/10", "100/0/0"): _d(-2.0, 3.0)}})  # fmt: skip
    (agree,) = [c for c in claims.check(mixes) if "agree" in c["claim"]]
    # Wider than twice the paper's 0.5-point spread: could not hold even for equal mixes.
    assert agree["verdict"] == stats.UNRESOLVABLE
    assert stats.equivalence(_d(0.2, 0.9), 0.5) == stats.UNRESOLVED  # narrow, partly outside
    assert stats.equivalence(_d(-0.3, 0.4), 0.5) == stats.HOLDS
    assert stats.equivalence(_d(0.6, 3.0), 0.5) == stats.REVERSED
    # Mixes that all answer the constant agree exactly, and that is no evidence: was "holds".
    flat = _doc("8", {m: {"mrpc": [50.6]} for m in ("80/10/10", "100/0/0", "random init")},
                {"mrpc": {pair_key("80/10/10", "100/0/0"): _d(0.0, 0.0),
                          pair_key("80/10/10", "random init"): _d(0.0, 0.0),
                          pair_key("100/0/0", "random init"): _d(0.0, 0.0)}})  # fmt: skip
    (agree,) = [c for c in claims.check(flat) if "agree" in c["claim"]]
    assert agree["verdict"] == stats.UNRESOLVED and "2 of 2 mixes" in agree["detail"]
    learned = {**flat, "intervals": {"mrpc": {
        **flat["intervals"]["mrpc"], pair_key("80/10/10", "random init"): _d(1.0, 3.0),
        pair_key("100/0/0", "random init"): _d(0.5, 2.5)}}}  # fmt: skip
    (agree,) = [c for c in claims.check(learned) if "agree" in c["claim"]]
    assert agree["verdict"] == stats.HOLDS  # both learned it, and within the paper's spread
    # Above random init but not above the best constant (random init below it): not learned.
    at_constant = {**learned, "intervals": {"mrpc": {
        **learned["intervals"]["mrpc"], pair_key("80/10/10", stats.BEST_CONSTANT): _d(1.0, 3.0),
        pair_key("100/0/0", stats.BEST_CONSTANT): _d(-0.5, 1.5)}}}  # fmt: skip
    (agree,) = [c for c in claims.check(at_constant) if "agree" in c["claim"]]
    assert agree["verdict"] == stats.UNRESOLVED and "1 of 2 mixes (100/0/0)" in agree["detail"]
    no_random = _doc("8", {m: {"conll_feature": [15.0]} for m in ("80/10/10", "100/0/0")},
                     {"conll_feature": {pair_key("80/10/10", "100/0/0"): _d(0.0, 0.0)}})
    no_random["baselines"] = {"conll_feature": {"best_constant": 17.56}}
    (agree,) = [c for c in claims.check(no_random) if "agree" in c["claim"]]
    assert agree["verdict"] == stats.UNRESOLVED  # below the best constant, no random init
    md = report.markdown({**doc, "scale": "cpu", "baselines": {}, "claims": claims.check(doc)})
    assert "- reversed: MLM (No NSP) beats LTR & No NSP on conll" in md
    # Claims on pairs without intervals (median rule) count apart from the verdicts.
    assert report.tally(claims.check(doc)) == "2 hold, 3 do not hold, 1 reversed"


def test_electra_bars_are_shown_without_a_left_to_right_arm():
    """Was: the ELECTRA bars' table sat inside the left-to-right one's branch, so the ELECTRA
    table's md (no LTR arm) never showed its generator and discriminator."""
    from bert_jax.ablations.checks import binary_entropy

    doc = _doc("electra", {"ELECTRA": {"mrpc": [55.0]}}, {})
    doc["pretraining"] = {"ELECTRA": {"mlm_accuracy": 0.2051, "unigram": 0.0501,
                                      "context_free": 0.1906, "hidden_accuracy": 0.0673,
                                      "discriminator_accuracy": 0.8728,
                                      "always_original": 0.8731,
                                      "discriminator_loss": 0.3482,
                                      "constant_loss": binary_entropy(0.12692),
                                      "token_alone_loss": 0.3286, "discriminator_auc": 0.7062,
                                      "token_alone_auc": 0.7674}}  # fmt: skip
    md = report.markdown({**doc, "scale": "cpu", "baselines": {}, "claims": []})
    row = "| ELECTRA | 0.0673 | 0.0501 | 0.8728 | 0.8731 | 0.3482 | 0.3805 | "
    row += "0.3286 | 0.7062 | 0.7674 |"
    assert row in md and "token-alone AUC |" in md
    assert binary_entropy(0.5) == pytest.approx(math.log(2)) and binary_entropy(0.0) == 0.0


def test_calibration_sets_aside_the_claims_on_tasks_without_range():
    from bert_jax.ablations.tables import calibration
    from bert_jax.ablations.tables.compare import NOT_USED, RANDOM_INIT

    ceiling = calibration.CEILING
    cal = _doc("calibration", {a: {"sst2": [70.0], "mrpc": [55.0]} for a in (RANDOM_INIT, ceiling)},
               {"sst2": {pair_key(ceiling, RANDOM_INIT): _d(12.0, 20.0)},
                "mrpc": {pair_key(ceiling, RANDOM_INIT): _d(4.0, 13.0)}})  # fmt: skip
    got = {c["claim"].split(":")[0]: c for c in claims.check(cal)}
    assert got["sst2"]["holds"] and not got["mrpc"]["holds"]  # diff 16 and 8.5 against 10
    assert calibration.uncalibrated({**cal, "claims": claims.check(cal)}) == ["mrpc"]
    cells = {a: {"sst2": [60.0], "mrpc": [60.0]} for a in ("No NSP", "LTR & No NSP", RANDOM_INIT)}
    both = {t: {pair_key("No NSP", "LTR & No NSP"): _d(1.0, 4.0)} for t in ("sst2", "mrpc")}
    table5 = {**_doc("5", cells, both), "uncalibrated": ["mrpc"]}
    verdicts = {c["claim"]: c["verdict"] for c in claims.check(table5) if "verdict" in c}
    assert verdicts["MLM (No NSP) beats LTR & No NSP on mrpc"] == NOT_USED
    assert verdicts["No NSP beats random init on mrpc"] == NOT_USED
    assert not any(v == NOT_USED for c, v in verdicts.items() if "sst2" in c)


def test_next_token_bar_counts_real_targets_after_the_first():
    from bert_jax.objectives.baselines import next_token_baselines

    ids = np.array([[1, 7, 7, 5, 0], [1, 7, 4, 0, 0]])  # targets: 7 7 5 | 7 4 (7 is most common)
    mask = (ids > 0).astype(int)
    train = [{"input_ids": ids, "input_mask": mask}]
    held = [{"input_ids": np.array([[1, 7, 3, 3, 7], [1, 7, 7, 7, 7]]),
             "input_mask": np.ones((2, 5), int), "example_mask": np.array([1.0, 0.0])}]
    assert next_token_baselines(train, held) == {"unigram": 0.5}  # 7 3 3 7; row 2 is padding


def test_aa_grid_script_prints_every_cell(tmp_path):
    """experiments/ablations/aa_grid.py at a toy size: every cell of the grid, and its json."""
    import json
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(__file__).resolve().parent.parent / "experiments/ablations/aa_grid.py"
    out = tmp_path / "grid.json"
    proc = subprocess.run([sys.executable, str(script), "--sims", "5", "--bootstrap_sims", "0",
                           "--examples", "40", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("\n| ") == 1 + 12  # the header, then 4 x 3 rows of seeds
    cells = json.loads(out.read_text())["cells"]
    assert len(cells) == 4 * 3 * 5 and all(0.0 <= c["welch"] <= 1.0 for c in cells)


def test_looks_are_counted_as_chances_of_a_false_verdict():
    """One A/A table read at a growing series of designs, as a sweep that adds seeds reads it:
    a repeated design is no new chance, growing ones are, and the level that holds the whole
    series at 5% is below 5% (aa_test.looks_p_values, experiments/ablations/aa_looks.py)."""
    assert abs(aa_test.p_value({"diff": 2.0, "low": 0.0, "high": 4.0, "df": 6.0}) - 0.05) < 1e-9
    assert aa_test.p_value({"diff": 1.0, "low": -math.inf, "high": math.inf, "df": 0.0}) == 1.0
    same = aa_test.looks_p_values([(3, 3), (3, 3)], 1, 2.6, sims=100, examples=300)
    np.testing.assert_array_equal(same[:, 0], same[:, 1])
    grow = aa_test.looks_p_values([(2, 2), (3, 3), (4, 4), (6, 6)], 1, 2.6, sims=600,
                                  examples=300, seed=1)  # fmt: skip
    # A table's first runs do not depend on the series' last design: a series cut short reads
    # the same tables at its looks (so a planned look only adds chances).
    cut = aa_test.looks_p_values([(2, 2), (3, 3)], 1, 2.6, sims=100, examples=300, seed=1)
    np.testing.assert_array_equal(cut, grow[:100, :2])
    e = aa_test.looks_error(grow)
    assert e["last_look"] <= 0.05 + 0.027, e  # the last look alone is calibrated
    assert e["any_look"] > e["last_look"] + 0.01 and e["level_per_look"] < 0.05, e
    low, high = e["level_per_look_mc"]
    assert low < e["level_per_look"] < high < 0.05, e  # its Monte Carlo interval
    # Against a fixed answer (the best constant) of the arm's own expected score.
    fixed = aa_test.looks_p_values([(3, 0), (5, 0)], 2, 5.0, sims=400, examples=300, seed=2,
                                   b_fixed=True)  # fmt: skip
    assert np.mean(fixed[:, -1] < 0.05) <= 0.05 + 0.033
