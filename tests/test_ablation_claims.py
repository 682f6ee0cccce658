"""The papers' claims checked on a table document: each claim holds or fails on the numbers it
names, claims about arms a table lacks are left out, and report.write puts them in the JSON and
the markdown."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bert_jax.ablations import claims, report
from bert_jax.errors import BertJaxError


def _doc(table: str, cells: dict[str, dict[str, list[float]]]) -> dict:
    arms = {a: {t: report.summarize(v, None) for t, v in row.items()} for a, row in cells.items()}
    return {"table": table, "arms": arms}


def _by_claim(doc: dict) -> dict[str, bool]:
    return {c["claim"]: c["holds"] for c in claims.check(doc)}


def test_table5_claims_hold_or_fail_on_margins_and_seed_std():
    doc = _doc("5", {
        "BERT": {"mrpc": [60.0, 61.0, 62.0], "squad": [9.0, 12.0, 6.0]},
        "No NSP": {"mrpc": [55.0, 55.0, 55.0], "squad": [10.0, 10.0, 10.0]},
        "LTR & No NSP": {"mrpc": [52.0, 52.0, 52.0], "squad": [11.0, 11.0, 11.0]},
        "+ BiLSTM": {"squad": [11.5, 11.5, 11.5]},
        "random init": {"mrpc": [50.0, 50.0, 50.0], "squad": [8.0, 8.0, 8.0]},
    })  # fmt: skip
    got = _by_claim(doc)
    assert got["BERT beats random init on mrpc by more than 3x the seed std"]  # +11, std 1
    assert not got["BERT beats random init on squad by more than 3x the seed std"]  # +1, std 3
    assert got["MLM (No NSP) beats LTR & No NSP on mrpc"]
    assert not got["MLM (No NSP) beats LTR & No NSP on squad"]
    assert got["+ BiLSTM recovers part of LTR's span-task gap (squad above LTR & No NSP)"]
    assert not any("conll" in c for c in got)  # no arm has the task: nothing to claim
    detail = {c["claim"]: c["detail"] for c in claims.check(doc)}
    assert detail["BERT beats random init on mrpc by more than 3x the seed std"] == (
        "61.00 vs 50.00 (margin +11.00, larger std 1.00)"
    )


def test_nsp_sop_claims_read_against_the_fresh_head():
    albert = _doc("nsp_sop", {"none": {"nsp": [52.4], "sop": [53.3]},
                              "NSP": {"nsp": [90.5], "sop": [52.0]},
                              "SOP": {"nsp": [78.9], "sop": [86.5]}})  # fmt: skip
    assert all(_by_claim(albert).values()) and len(_by_claim(albert)) == 4
    # Commit fe60c7c's CPU-scale run: the SOP model did not solve NSP.
    ours = _doc("nsp_sop", {"none": {"nsp": [55.0], "sop": [48.09]},
                            "NSP": {"nsp": [65.94], "sop": [51.43]},
                            "SOP": {"nsp": [51.88], "sop": [55.10]}})  # fmt: skip
    failed = [c for c, holds in _by_claim(ours).items() if not holds]
    assert len(failed) == 1 and failed[0].startswith("the SOP model is well above chance on nsp")


def test_nsp_sop_claims_read_by_their_intervals_against_the_best_constant():
    doc = _doc("nsp_sop", {"none": {"nsp": [53.0, 47.0], "sop": [57.0, 43.0]},
                           "NSP": {"nsp": [72.0, 70.0], "sop": [55.0, 56.0]},
                           "SOP": {"nsp": [50.0, 51.0], "sop": [64.0, 62.0]}})  # fmt: skip
    doc["baselines"] = {"nsp": {"best_constant": 53.0}, "sop": {"best_constant": 57.1}}

    def diff(low: float, high: float) -> dict:
        return {"diff": (low + high) / 2, "low": low, "high": high, "examples": 640,
                "runs": [2, 1]}  # fmt: skip

    doc["intervals"] = {
        "nsp": {"NSP - best constant": diff(12.0, 20.0), "SOP - best constant": diff(-9.0, -1.0)},
        "sop": {"NSP - best constant": diff(-6.0, 1.0), "SOP - best constant": diff(3.0, 9.0)},
    }
    got = {c["claim"].split(" (")[0]: c for c in claims.check(doc)}
    assert {k: c["verdict"] for k, c in got.items()} == {
        "the NSP model is well above chance on nsp pairs": "holds",  # [+12, +20] above 0
        # NSP - constant on sop is [-6, +1]: reaches past -5, so not shown to be near chance
        "the NSP model is near chance on sop pairs": "unresolved at this scale",
        "the SOP model is well above chance on sop pairs": "holds",
        "the SOP model is well above chance on nsp pairs": "reversed",  # [-9, -1]
    }
    near = got["the NSP model is near chance on sop pairs"]
    assert near["detail"].startswith("55.50 vs 57.10: difference -2.50, 95% interval [-6.00, "
                                     "+1.00] over 640 examples and 2 x 1 runs")  # fmt: skip
    doc["intervals"]["sop"]["NSP - best constant"] = diff(-4.0, 1.0)  # within 5 points
    doc["intervals"]["nsp"]["SOP - best constant"] = diff(20.0, 30.0)
    got = {c["claim"].split(" (")[0]: c["verdict"] for c in claims.check(doc)}
    assert got["the NSP model is near chance on sop pairs"] == "holds"
    assert got["the SOP model is well above chance on nsp pairs"] == "holds"
    doc["intervals"]["sop"]["NSP - best constant"] = diff(-12.0, -6.0)  # all of it beyond 5
    got = {c["claim"].split(" (")[0]: c["verdict"] for c in claims.check(doc)}
    assert got["the NSP model is near chance on sop pairs"] == "reversed"


def test_table6_names_where_perplexity_does_not_fall_and_table8_the_spread():
    from bert_jax.ablations.tables import table6

    paper_ppl = {arm: {"mlm_ppl": [row["mlm_ppl"]]} for arm, row in table6.TABLE.paper.items()}
    paper = _doc("6", paper_ppl)
    assert _by_claim(paper) == {
        "held-out masked-LM perplexity falls with every step up in encoder parameters": True
    }
    rising = _doc("6", {"L=1,H=128,A=2": {"mlm_ppl": [442.7]},
                        "L=2,H=128,A=1": {"mlm_ppl": [431.7]},
                        "L=2,H=128,A=2": {"mlm_ppl": [442.0]}})  # fmt: skip
    (c,) = claims.check(rising)
    assert not c["holds"] and "L=2,H=128,A=1 -> L=2,H=128,A=2" in c["detail"]
    # Fine-tuned columns: the largest size (by 12 L H^2, not by name order) against the
    # smallest, with or without a perplexity column.
    sizes = _doc("6", {"L=4,H=128,A=2": {"conll": [20.0, 21.0]},
                       "L=1,H=128,A=2": {"conll": [15.0, 16.0]},
                       "L=2,H=128,A=2": {"conll": [23.0, 23.5]}})  # fmt: skip
    assert _by_claim(sizes) == {"L=4,H=128,A=2 beats L=1,H=128,A=2 on conll": True}
    sizes["arms"]["L=1,H=128,A=2"]["conll"] = report.summarize([22.0, 22.0], None)
    assert _by_claim(sizes) == {"L=4,H=128,A=2 beats L=1,H=128,A=2 on conll": False}
    mixes = _doc("8", {"80/10/10": {"mrpc": [58.0, 59.0, 60.0]}, "100/0/0": {"mrpc": [51.0] * 3},
                       "random init": {"mrpc": [50.8] * 3}})  # fmt: skip
    got = _by_claim(mixes)
    assert not got["the masking mixes agree on mrpc (spread within 3x the largest seed std)"]
    assert got["80/10/10 beats random init on mrpc by more than 3x the seed std"]


def test_table6_judges_each_step_up_by_its_held_out_loss_interval():
    """Per-sequence held-out loss rows (checks.masked_lm_loss_rows: [summed loss, predictions])
    of two pretraining runs a size: the larger size's loss 1 nat lower holds, by Welch's t over
    the runs (one degree of freedom a size); read the other way round it is reversed."""
    from bert_jax.ablations import interval

    rng = np.random.default_rng(0)
    count = rng.integers(1, 20, 300).astype(np.float64)

    def run(nats: float) -> np.ndarray:  # a sequence's summed loss over its predictions
        return np.stack([(nats + rng.normal(0, 0.2, len(count))) * count, count], 1)

    small, big = "L=1,H=128,A=2", "L=4,H=192,A=3"
    high, low = [run(6.0), run(6.02)], [run(5.0), run(5.03)]
    for rows_small, rows_big, verdict in ((high, low, "holds"), (low, high, "reversed")):
        ppl = {arm: math.exp(6.0 if rows is high else 5.0)
               for arm, rows in ((small, rows_small), (big, rows_big))}  # fmt: skip
        doc = _doc("6", {arm: {"mlm_ppl": [p] * 2} for arm, p in ppl.items()})
        d = interval.difference(rows_small, rows_big, "mlm_ppl", [0, 1], [0, 1])
        doc["intervals"] = {"mlm_ppl": {f"{small} - {big}": d}}
        got = {c["claim"]: c for c in claims.check(doc)}
        c = got[f"held-out masked-LM loss falls from {small} to {big} (nats)"]
        assert c["verdict"] == verdict, c
        shown = f"perplexity {ppl[small]:.1f} vs {ppl[big]:.1f}; loss difference "
        assert c["detail"].startswith(shown), c["detail"]
        assert abs(abs(d["diff"]) - 1.0) < 0.1 and d["high"] - d["low"] < 1.9 and d["df"] <= 2
        # The whole ordering follows its steps' intervals, not its medians.
        whole = got["held-out masked-LM perplexity falls with every step up in encoder parameters"]
        assert whole["verdict"] == verdict and " of 1 steps hold" in whole["detail"]
    # One run of the smaller size: no interval, so the ordering is unresolved, though its
    # medians fall.
    d = interval.difference([high[0]], low, "mlm_ppl", [0], [0, 1])
    doc["intervals"] = {"mlm_ppl": {f"{small} - {big}": d}}
    doc["arms"][small]["mlm_ppl"]["median"] = math.exp(6.0)
    doc["arms"][big]["mlm_ppl"]["median"] = math.exp(5.0)
    whole = {c["claim"]: c for c in claims.check(doc)}[
        "held-out masked-LM perplexity falls with every step up in encoder parameters"
    ]
    assert whole["verdict"] == "unresolved at this scale" and not whole["holds"], whole


def test_report_writes_the_claims_into_the_json_and_the_markdown(tmp_path):
    doc = _doc("fig5", {"random init": {"mrpc": [50.0]}, "MLM@10": {"mrpc": [49.0]},
                        "LTR@10": {"mrpc": [53.0]}, "MLM@20": {"mrpc": [58.0]},
                        "LTR@20": {"mrpc": [53.0]}})  # fmt: skip
    report.write(str(tmp_path), "fig5", "cpu", doc["arms"], {}, None)
    written = json.loads((tmp_path / "fig5.json").read_text())
    assert [c["holds"] for c in written["claims"]] == [False, True]
    md = (tmp_path / "fig5.md").read_text()
    assert "- does not hold: MLM beats LTR on mrpc after 10 pretraining steps: 49.00 vs 53.00" in md
    assert "- holds: MLM beats LTR on mrpc after 20 pretraining steps" in md
    # A table that fine-tunes nothing scores its pairs on held-out pretraining text, not dev.
    pairs = _doc("nsp_sop", {"NSP": {"nsp": [75.0]}, "none": {"nsp": [50.0]}})
    constant = {"nsp": {"majority": 53.0, "best_constant": 53.0, "constant_answer": "1"}}
    report.write(str(tmp_path), "nsp_sop", "cpu", pairs["arms"], constant, None)
    assert "| best constant (held-out pairs) | 53.00 |" in (tmp_path / "nsp_sop.md").read_text()
    # Its intervals cannot be computed again without the per-example rows it was written without.
    with pytest.raises(BertJaxError, match=r"nsp_sop.rows.npz: no such file"):
        report.rerender(str(tmp_path / "nsp_sop.json"))
    with pytest.raises(BertJaxError, match=r"6.json: no such file"):
        report.rerender(str(tmp_path / "6.json"))
    (tmp_path / "other.json").write_text('{"model": "bert"}')
    with pytest.raises(BertJaxError, match=r"other.json: not a table"):
        report.rerender(str(tmp_path / "other.json"))
    # A rows file cut short (a copy that stopped) is named, not a BadZipFile traceback.
    (tmp_path / "nsp_sop.rows.npz").write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(BertJaxError, match=r"nsp_sop.rows.npz: not a readable rows file"):
        report.rerender(str(tmp_path / "nsp_sop.json"))


def test_an_interval_read_in_the_other_order_turns_every_per_arm_field_round():
    """A claim of B over A reads the interval stored as A - B turned round: its means, runs and
    spreads B's first (the claim's wording names them in that order); a bound an arm's missing
    spread left open stays open."""
    from bert_jax.ablations.tables.compare import interval

    stored = {"diff": -4.0, "low": -9.0, "high": 1.0, "runs": [4, 22], "units": [2, 11],
              "unit_kinds": ["pretraining runs", "one run"], "spreads": [0.7, None],
              "means": [20.0, 24.0], "df": 2}  # fmt: skip
    doc = {"intervals": {"conll": {"A - B": stored}}}
    turned = interval(doc, "B", "A", "conll")
    assert turned == {**stored, "diff": 4.0, "low": -1.0, "high": 9.0, "runs": [22, 4],
                      "units": [11, 2], "unit_kinds": ["one run", "pretraining runs"],
                      "spreads": [None, 0.7], "means": [24.0, 20.0]}  # fmt: skip
    assert interval(doc, "A", "B", "conll") == stored
    stored.update(low=None, high=None)
    assert interval(doc, "B", "A", "conll")["low"] is None
