"""The one masker (static in the data pipeline, dynamic in the input pipeline): the reference's
rules, determinism per (seed, example), the 80/10/10 split and other mixes, whole words."""

from __future__ import annotations

import numpy as np

from bert_jax.objectives.masking import MaskingSpec, mask_batch

SPEC = MaskingSpec(mask_id=103, vocab_size=30522, special_ids=(101, 102, 0))
L, P = 128, 20


def make_batch(n_examples: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """[CLS] A [SEP] B [SEP] rows of random lengths, zero padded."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((n_examples, L), np.int64)
    mask = np.zeros((n_examples, L), np.int64)
    for row in range(n_examples):
        n = int(rng.integers(6, L + 1))
        a = int(rng.integers(2, n - 2))
        ids[row, :n] = rng.integers(1000, 30000, n)
        ids[row, [0, a, n - 1]] = [101, 102, 102]
        mask[row, :n] = 1
    return ids, mask


def test_vocab_file_gives_the_special_ids(uncased_vocab):
    spec = MaskingSpec.from_vocab_file(str(uncased_vocab))
    assert (spec.mask_id, spec.vocab_size, spec.special_ids) == (103, 30522, (101, 102, 0))


def test_masks_follow_the_reference_rules():
    ids, mask = make_batch(300)
    out = mask_batch(ids, mask, np.arange(300), SPEC, P, seed=1)
    for row in range(300):
        n = int(mask[row].sum())
        k = int(out["masked_lm_weights"][row].sum())
        assert k == min(P, max(1, round(n * 0.15)))  # Python 3 round, as the reference
        positions = out["masked_lm_positions"][row]
        assert list(positions[:k]) == sorted(set(positions[:k]))
        assert (positions[k:] == 0).all() and (out["masked_lm_ids"][row, k:] == 0).all()
        assert (positions[:k] < n).all()
        np.testing.assert_array_equal(out["masked_lm_ids"][row, :k], ids[row, positions[:k]])
        assert not np.isin(ids[row, positions[:k]], SPEC.special_ids).any()
        untouched = np.setdiff1d(np.arange(L), positions[:k])
        np.testing.assert_array_equal(out["input_ids"][row, untouched], ids[row, untouched])


def test_masks_depend_only_on_seed_and_example_index():
    ids, mask = make_batch(12)
    whole = mask_batch(ids, mask, np.arange(100, 112), SPEC, P, seed=4)
    parts = [mask_batch(ids[s], mask[s], np.arange(100, 112)[s], SPEC, P, seed=4) for s in
             (slice(0, 5), slice(5, 12))]  # fmt: skip
    for key, value in whole.items():
        if key == "mask_kinds":  # batch totals
            np.testing.assert_array_equal(value, parts[0][key] + parts[1][key])
        else:
            np.testing.assert_array_equal(value, np.concatenate([p[key] for p in parts]), key)
    other_step = mask_batch(ids, mask, np.arange(112, 124), SPEC, P, seed=4)
    other_seed = mask_batch(ids, mask, np.arange(100, 112), SPEC, P, seed=5)
    for other in (other_step, other_seed):
        assert not np.array_equal(other["masked_lm_positions"], whole["masked_lm_positions"])


def test_replacement_is_80_10_10_and_positions_are_uniform():
    ids, mask = make_batch(4000, seed=2)
    out = mask_batch(ids, mask, np.arange(4000), SPEC, P, seed=0)
    valid = out["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(4000)[:, None], valid.shape)[valid]
    positions = out["masked_lm_positions"][valid]
    new = out["input_ids"][rows, positions]
    original = out["masked_lm_ids"][valid]
    total = valid.sum()
    assert total > 35_000
    as_mask = np.mean(new == 103)
    kept = np.mean(new == original)
    random = 1 - as_mask - kept
    # Binomial standard errors are ~0.002 (mask) and ~0.0015 (kept/random): ~5 sigma bounds.
    assert abs(as_mask - 0.8) < 0.01 and abs(kept - 0.1) < 0.007 and abs(random - 0.1) < 0.007
    replaced = new[(new != 103) & (new != original)]
    assert replaced.min() >= 0 and replaced.max() < 30522
    assert np.unique(replaced).size > 0.8 * replaced.size  # spread over the vocab
    # Every candidate position is equally likely: relative position in the sequence ~ uniform.
    lengths = mask.sum(1)[rows]
    relative = (positions - 1) / (lengths - 2)
    assert abs(relative.mean() - 0.5) < 0.01


def test_mask_kinds_count_the_replacements():
    ids, mask = make_batch(200, seed=3)
    out = mask_batch(ids, mask, np.arange(200), SPEC, P, seed=2)
    valid = out["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(200)[:, None], valid.shape)[valid]
    new = out["input_ids"][rows, out["masked_lm_positions"][valid]]
    n_mask, n_random, n_kept = out["mask_kinds"]
    assert n_mask + n_random + n_kept == valid.sum()
    # Fixed seed: no random replacement happens to draw the [MASK] id here, so the count is exact.
    assert n_mask == (new == SPEC.mask_id).sum()
    assert n_kept <= (new == out["masked_lm_ids"][valid]).sum()


def test_other_mixes_follow_their_split():
    """Table 8's mixes: 100% [MASK], and 0/20/80 (never [MASK])."""
    ids, mask = make_batch(1500, seed=5)
    for mask_prob, random_prob in ((1.0, 0.0), (0.0, 0.2)):
        spec = MaskingSpec(103, 30522, (101, 102, 0), mask_prob=mask_prob, random_prob=random_prob)
        out = mask_batch(ids, mask, np.arange(1500), spec, P, seed=7)
        total = out["masked_lm_weights"].sum()
        fractions = out["mask_kinds"] / total
        np.testing.assert_allclose(fractions, [mask_prob, random_prob, 1 - mask_prob - random_prob],
                                   atol=0.02)  # fmt: skip


def test_whole_word_masking_takes_every_piece_of_a_word(uncased_vocab):
    from bert_jax.tokenization import FullTokenizer

    tokenizer = FullTokenizer(str(uncased_vocab), do_lower_case=True)
    spec = MaskingSpec.from_vocab_file(str(uncased_vocab), whole_word=True)
    text = "unbelievably tokenization hyperparameters reconfigured the photosynthesis apparatus"
    pieces = tokenizer.tokenize(text)
    row = [101, *tokenizer.convert_tokens_to_ids(pieces), 102]
    ids = np.zeros((64, 32), np.int64)
    ids[:, : len(row)] = row
    mask = (ids != 0).astype(np.int64)
    out = mask_batch(ids, mask, np.arange(64), spec, 20, seed=3)
    continuation = np.isin(ids, spec.continuation_ids)
    budget = max(1, round(len(row) * 0.15))
    for r in range(64):
        k = int(out["masked_lm_weights"][r].sum())
        assert 1 <= k <= budget
        chosen = np.zeros(32, bool)
        chosen[out["masked_lm_positions"][r, :k]] = True
        # A chosen "##" piece implies its word's previous piece is chosen, and a chosen word
        # start implies its following pieces are chosen.
        for i in range(1, len(row)):
            if continuation[r, i]:
                assert chosen[i] == chosen[i - 1], (r, i, pieces)
