"""ALBERT's n-gram masking in the one masker: span lengths n <= 3 drawn with P(n) proportional
to 1/n, the same budget as single-token masking, in static shards and dynamic masks alike."""

from __future__ import annotations

import numpy as np

from bert_jax import objectives
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.input import EvalInput
from bert_jax.objectives.masking import MaskingSpec, mask_batch, ngram_lengths


def _runs(positions_BxP: np.ndarray, weights_BxP: np.ndarray) -> np.ndarray:
    """Lengths of the runs of consecutive masked positions."""
    out = []
    for pos, w in zip(positions_BxP, weights_BxP, strict=True):
        p = np.sort(pos[w > 0])
        if p.size:
            breaks = np.flatnonzero(np.diff(p) != 1)
            out += np.diff(np.concatenate([[-1], breaks, [p.size - 1]])).tolist()
    return np.asarray(out)


def test_ngram_lengths_follow_one_over_n():
    u = (np.arange(110_000) + 0.5) / 110_000
    counts = np.bincount(ngram_lengths(u, 3))[1:]
    np.testing.assert_allclose(counts / counts.sum(), [6 / 11, 3 / 11, 2 / 11], atol=1e-4)


def test_masker_draws_spans_with_the_albert_distribution(uncased_vocab):
    rule = objectives.get("mlm_sop").masking
    assert rule.max_ngram == 3
    spec = MaskingSpec.from_vocab_file(str(uncased_vocab), rule=rule)
    rs = np.random.RandomState(0)
    ids = rs.randint(1000, 30000, size=(300, 512))
    out = mask_batch(ids, np.ones_like(ids), np.arange(300), spec, 80, seed=3)
    counts = out["ngram_counts"]
    # The drawn n follow 1/n exactly (above); as in ALBERT, a span that overlaps a chosen one or
    # overruns the budget is skipped, which favours short spans a little (measured here:
    # 0.569 / 0.271 / 0.161 against 0.545 / 0.273 / 0.182).
    np.testing.assert_allclose(counts / counts.sum(), [6 / 11, 3 / 11, 2 / 11], atol=0.03)
    assert counts[0] > counts[1] > counts[2] > 0.12 * counts.sum()
    # The budget is the single-token one: round(512 * 0.15) = 77 per row.
    np.testing.assert_array_equal(out["masked_lm_weights"].sum(1), 77)
    assert np.sum(counts * np.arange(1, 4)) == 300 * 77
    # Spans really are contiguous: most masked tokens sit in runs longer than 1.
    runs = _runs(out["masked_lm_positions"], out["masked_lm_weights"])
    assert np.sum(runs[runs > 1]) / np.sum(runs) > 0.5
    # Single-token masking of the same rows: runs longer than 1 are the exception.
    single = MaskingSpec.from_vocab_file(str(uncased_vocab))
    plain = mask_batch(ids, np.ones_like(ids), np.arange(300), single, 80, seed=3)
    runs1 = _runs(plain["masked_lm_positions"], plain["masked_lm_weights"])
    assert np.sum(runs1[runs1 > 1]) / np.sum(runs1) < 0.35
    assert "ngram_counts" not in plain


def test_static_and_dynamic_sop_masks_are_ngrams(tmp_path, uncased_vocab):
    kw = dict(objective="sop", max_seq_length=128, max_predictions_per_seq=20, dupe_factor=1)
    create_pretraining_data("embedded:60", str(tmp_path / "static"), str(uncased_vocab), **kw)
    create_pretraining_data("embedded:60", str(tmp_path / "dynamic"), str(uncased_vocab),
                            dynamic_masking=True, **kw)  # fmt: skip
    spec = MaskingSpec.from_vocab_file(
        str(uncased_vocab), rule=objectives.get("mlm_sop").masking
    )
    fractions = []
    for name, dynamic in (("static", None), ("dynamic", spec)):
        runs = []
        for b in EvalInput(str(tmp_path / name / "*.tfrecord"), 32, 128, 20,
                           objective="mlm_sop", dynamic_masking=dynamic):  # fmt: skip
            runs.append(_runs(b["masked_lm_positions"], b["masked_lm_weights"]))
        runs = np.concatenate(runs)
        fractions.append(np.sum(runs[runs > 1]) / np.sum(runs))
    print(f"masked tokens in spans > 1: static {fractions[0]:.3f}, dynamic {fractions[1]:.3f}")
    assert min(fractions) > 0.45
