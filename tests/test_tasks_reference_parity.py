"""Fine-tuning data and metrics against google-research/bert and the official SQuAD scripts
(tests/fixtures/reference_tasks/README.md says how the golden files were made): SQuAD features,
predictions, n-best lists and null odds of run_squad.py; EM/F1/HasAns/NoAns/best_* of
evaluate-v1.1.py / evaluate-v2.0.py; GLUE features of run_classifier.py for the nine tasks."""

from __future__ import annotations

import gzip
import json
import pathlib

import numpy as np
import pytest

from bert_jax.tasks import glue, squad, squad_eval, squad_predict
from bert_jax.tokenization import FullTokenizer

FIX = pathlib.Path(__file__).parent / "fixtures" / "reference_tasks"
SQUAD = FIX / "squad"
CONFIGS = [(384, 128, 64), (64, 16, 16)]  # (max_seq_length, doc_stride, max_query_length)
VERSIONS = ["v1.1", "v2.0"]


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return FullTokenizer(str(uncased_vocab), do_lower_case=True)


@pytest.fixture(scope="module")
def squad_golden():
    with np.load(SQUAD / "ref-features.npz") as z:
        return {k: z[k] for k in z.files}


def logits(mask_NxL: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The logits the golden predictions were made from (README): splitmix64 of a counter scaled
    to [-8.15, 8.15) and rounded to float32; padding 20 lower; +9 on [CLS] of every third window."""
    n, length = mask_NxL.shape
    x = (np.arange(1, 2 * n * length + 1, dtype=np.uint64) + np.uint64(seed)) * np.uint64(
        0x9E3779B97F4A7C15
    )
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    u = (x >> np.uint64(40)).astype(np.float64) / float(1 << 24)
    v = ((u - 0.5) * 16.3).reshape(2, n, length)
    v[:, np.arange(n) % 3 == 1, 0] += 9.0
    v[:, mask_NxL == 0] -= 20.0
    v = v.astype(np.float32)
    return v[0], v[1]


def _featurize(tokenizer, version, split, cfg):
    path = str(SQUAD / f"{split}-{version}.json")
    examples, stats = squad.read_examples(path, split == "train", version == "v2.0")
    arrays, metas = squad.featurize(
        examples, tokenizer, *cfg, is_training=split == "train", stats=stats
    )
    return examples, arrays, metas


def _maps(metas, length):
    to_orig = np.full((len(metas), length), -1, np.int16)
    max_ctx = np.full((len(metas), length), -1, np.int8)
    for i, m in enumerate(metas):
        for pos, word in m.token_to_orig_map.items():
            to_orig[i, pos] = word
        for pos, is_max in m.token_is_max_context.items():
            max_ctx[i, pos] = is_max
    return to_orig, max_ctx


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"L{c[0]}")
@pytest.mark.parametrize("split", ["train", "dev"])
@pytest.mark.parametrize("version", VERSIONS)
def test_squad_features_equal_run_squad(tokenizer, squad_golden, version, split, cfg):
    _, arrays, metas = _featurize(tokenizer, version, split, cfg)
    key = f"{version}/{split}/{cfg[0]}"
    ref = {k.rsplit("/", 1)[1]: v for k, v in squad_golden.items() if k.startswith(key + "/")}
    assert len(metas) == len(ref["input_ids"]) > 60
    to_orig, max_ctx = _maps(metas, cfg[0])
    ours = {
        "input_ids": arrays["input_ids"],
        "input_mask": arrays["input_mask"],
        "segment_ids": arrays["segment_ids"],
        "example_index": np.array([m.example_index for m in metas]),
        "token_to_orig": to_orig,
        "max_context": max_ctx,
    }
    if split == "train":
        ours |= {k: arrays[k] for k in ("start_positions", "end_positions")}
    assert sorted(ours) == sorted(ref)
    for name, value in ref.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=f"{key} {name}")


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"L{c[0]}")
@pytest.mark.parametrize("version", VERSIONS)
def test_squad_predictions_nbest_and_null_odds_equal_write_predictions(tokenizer, version, cfg):
    examples, arrays, metas = _featurize(tokenizer, version, "dev", cfg)
    v2 = version == "v2.0"
    start, end = logits(arrays["input_mask"], seed=cfg[0] + (2 if v2 else 1))
    preds, nbest, odds = squad_predict.predict(
        examples, metas, start, end, version_2=v2, n_best_size=20, max_answer_length=30
    )
    with gzip.open(SQUAD / f"ref-predictions-{version}-{cfg[0]}.json.gz", "rt") as f:
        ref = json.load(f)
    assert preds == ref["predictions"]
    assert nbest == ref["nbest"]  # texts, probabilities and logits, entry for entry
    assert odds == ref.get("null_odds", {})
    # The data exercise what issue 15 was about: Greek final sigma and projected answers.
    assert any("Σ" in text for text in preds.values())


def _official_runs():
    return json.loads((SQUAD / "official-eval.json").read_text())


def _prediction_set(version: str, name: str) -> tuple[dict, dict | None]:
    if name == "hand":
        hand = json.loads((SQUAD / f"hand-predictions-{version}.json").read_text())
        return (hand["predictions"], hand["null_odds"]) if version == "v2.0" else (hand, None)
    with gzip.open(SQUAD / f"ref-predictions-{version}-{name[4:]}.json.gz", "rt") as f:
        ref = json.load(f)
    return ref["predictions"], ref.get("null_odds")


def _run_id(run: dict) -> str:
    missing = "-missing" if "missing" in run else ""
    odds = "-odds" if run["args"] else ""
    thresh = f"-t{run['args'][3]}" if len(run["args"]) > 2 else ""
    return f"{run['version']}-{run['predictions']}{missing}{odds}{thresh}"


@pytest.mark.parametrize("run", _official_runs(), ids=_run_id)
def test_squad_metrics_equal_official_scripts(run):
    dataset = squad.load_dataset(str(SQUAD / f"dev-{run['version']}.json"))
    preds, odds = _prediction_set(run["version"], run["predictions"])
    preds = {k: v for k, v in preds.items() if k not in run.get("missing", [])}
    if run["version"] == "v1.1":
        ours = squad_eval.evaluate_v1(dataset, preds)
    else:
        thresh = float(run["args"][3]) if len(run["args"]) > 2 else 1.0
        ours = squad_eval.evaluate_v2(dataset, preds, odds if run["args"] else None, thresh)
    expected = run["result"]
    if "missing" in run:  # the script itself stops at its HasAns/NoAns split (KeyError)
        assert run["cli"]["error"].startswith("KeyError")
    for name, value in expected.items():
        assert ours[name] == pytest.approx(value, abs=1e-9, rel=0), name
    if "missing" in run:  # our HasAns/NoAns split covers the answered questions
        assert ours["HasAns_total"] + ours["NoAns_total"] == ours["total"] == len(preds)
    else:
        assert set(ours) == set(expected)


# ---- GLUE ---------------------------------------------------------------------------------------
GLUE_SPLITS = [
    (name, split)
    for name, spec in glue.TASKS.items()
    for split in ("train", *spec.dev_splits, *spec.test_splits)
]


@pytest.fixture(scope="module")
def glue_golden():
    with np.load(FIX / "glue" / "ref-features.npz") as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("length", [128, 16])
@pytest.mark.parametrize("name,split", GLUE_SPLITS)
def test_glue_features_equal_run_classifier(tokenizer, glue_golden, name, split, length):
    spec = glue.get_spec(name)
    examples = glue.read_split(spec, str(FIX / "glue" / name), split)
    ours = glue.featurize(spec, examples, tokenizer, length)
    key = f"{name}/{split}/{length}"
    assert len(examples) == len(glue_golden[f"{key}/input_ids"]) >= 8
    for feature in ("input_ids", "input_mask", "segment_ids", "labels"):
        golden = glue_golden[f"{key}/{feature}"]
        np.testing.assert_array_equal(ours[feature], golden, err_msg=f"{key} {feature}")
