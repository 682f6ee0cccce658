"""experiments/elmo_vs_bert_ner.py end to end at a toy size: both LMs pretrain on the embedded
corpus, both frozen models feed the BiLSTM tagger on the suite's conll task for two seeds, and
every reported F1 is the seqeval entity F1 of the predictions the run wrote (recomputed here from
its `word gold predicted` files). No ordering is asserted at this size."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import numpy as np
import pytest

from bert_jax.tasks import ner

SCRIPT = pathlib.Path(__file__).parents[1] / "experiments" / "elmo_vs_bert_ner.py"


def _main():
    spec = importlib.util.spec_from_file_location("elmo_vs_bert_ner", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def _f1_of(path: pathlib.Path) -> float:
    gold, pred = [[]], [[]]
    for line in path.read_text().splitlines():
        if not line:
            gold.append([])
            pred.append([])
            continue
        _, g, p = line.split()
        gold[-1].append(g)
        pred[-1].append(p)
    gold, pred = [s for s in gold if s], [s for s in pred if s]
    return 100.0 * ner.entity_f1(gold, pred)["f1"]


@pytest.mark.slow
def test_script_reports_both_arms_from_real_predictions(tmp_path):
    out = _main()(["--workdir", str(tmp_path), "--quick", "--steps", "2", "--seeds", "2",
                   "--skip_random", "--max_documents", "400"])  # fmt: skip
    assert set(out["arms"]) == {"BERT trained", "ELMo trained"}
    assert out["dev"]["entities"] > 0
    for r in out["arms"].values():
        assert len(r["f1"]) == len(set(r["runs"])) == 2 and all(0.0 <= f <= 100.0 for f in r["f1"])
        assert r["median"] == pytest.approx(float(np.median(r["f1"])))
        for run, f1 in zip(r["runs"], r["f1"], strict=True):
            preds = pathlib.Path(run) / "dev_predictions.txt"
            assert len(preds.read_text().split("\n\n")) > 1
            assert f1 == pytest.approx(_f1_of(preds))
    bert, elmo = out["lm"]["bert"], out["lm"]["elmo"]
    assert bert["num_params"] > 0 and elmo["num_params"] > 0
    for v in (bert["eval_masked_lm_perplexity"], elmo["eval_forward_perplexity"],
              elmo["eval_backward_perplexity"], elmo["unigram_perplexity"]):  # fmt: skip
        assert math.isfinite(v) and v > 1
    assert len(list(tmp_path.glob("elmo_vs_bert_ner_*.json"))) == 1
