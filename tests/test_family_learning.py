"""RoBERTa's and ALBERT's `cpu` recipes learn on the corpus snapshot (experiments/family_learning.py
at a smaller size): held-out masked-LM accuracy above always predicting the most frequent
training target, scored on the same masks (RoBERTa's drawn dynamically, ALBERT's n-gram spans
written into the shards). ALBERT's sentence order needs more steps and more held-out pairs than
a test can afford (0.580 against the majority's 0.536 on 1325 pairs after 3000 steps; at 600
steps 0.578 against 0.560 on 218 pairs, within noise), so it is measured by the script only."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).parents[1] / "experiments" / "family_learning.py"


@pytest.fixture(scope="module")
def family_learning():
    spec = importlib.util.spec_from_file_location("family_learning", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # a vocab, shards and a short run: 65 s (RoBERTa), 100 s (ALBERT) in the suite
@pytest.mark.parametrize("family", ["roberta", "albert"])
def test_cpu_recipe_beats_its_trivial_baselines(family_learning, family, tmp_path):
    # LAMB with shared layers starts slower. Held-out masked-LM accuracy over the unigram rate on
    # the corpus snapshot, seeds 0, 1, 2 (`config.seed`): ALBERT at 400 steps 1.72x, 1.67x, 1.69x;
    # RoBERTa at 200 steps 1.95x, 2.48x, 1.56x (its dynamic masks move with the seed), at 300
    # steps 2.67x, 3.54x, 2.80x, hence 300.
    steps = {"roberta": 300, "albert": 400}[family]
    r = family_learning.measure(family, tmp_path, steps, corpus_bytes=300_000, vocab_size=1000,
                               corpus="snapshot")  # fmt: skip
    print(family, r)
    assert r["mlm_accuracy"] > 1.5 * r["unigram_mlm_accuracy"], r
