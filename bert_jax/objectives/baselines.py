"""Masked-LM accuracy of predictors that use no context, to read a model's accuracy against.

`unigram`: always the most frequent training target. `unigram_or_copy`: where the input shows
[MASK], the most frequent target; elsewhere the input token itself. With BERT's 80/10/10 mix a
tenth of the targets stand unchanged in the input, and tied input/output embeddings copy them
almost for free, so a model scores about `0.8 * unigram + 0.1` before it uses any context:
`unigram_or_copy` is the bar that says it does.

    b = masked_lm_baselines(train_batches, eval_batches, mask_id)   # {"unigram", "unigram_or_copy"}
    b = next_token_baselines(train_batches, eval_batches)           # {"unigram"}: LTR's bar

Batches are dicts of numpy arrays in the shard schema (input_ids, masked_lm_positions,
masked_lm_ids, masked_lm_weights), e.g. from `bert_jax.input.EvalInput`.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

import numpy as np


def most_frequent_target(batches: Iterable[dict]) -> int:
    counts: collections.Counter = collections.Counter()
    for b in batches:
        counts.update(b["masked_lm_ids"][b["masked_lm_weights"] > 0].tolist())
    if not counts:
        raise ValueError("no masked-LM targets in the batches")
    return counts.most_common(1)[0][0]


def masked_lm_baselines(
    train_batches: Iterable[dict], eval_batches: Iterable[dict], mask_id: int
) -> dict[str, float]:
    top = most_frequent_target(train_batches)
    unigram = copy = total = 0.0
    for b in eval_batches:
        w_BxP, labels_BxP = b["masked_lm_weights"], b["masked_lm_ids"]
        shown_BxP = np.take_along_axis(b["input_ids"], b["masked_lm_positions"], axis=1)
        guess_BxP = np.where(shown_BxP == mask_id, top, shown_BxP)
        unigram += float(np.sum((labels_BxP == top) * w_BxP))
        copy += float(np.sum((labels_BxP == guess_BxP) * w_BxP))
        total += float(np.sum(w_BxP))
    total = max(total, 1.0)
    return {"unigram": unigram / total, "unigram_or_copy": copy / total}


def _next_tokens(b: dict) -> np.ndarray:
    """The targets of a left-to-right LM: every real token after the first of a real row."""
    real_BxL = b["input_mask"][:, 1:] > 0
    if "example_mask" in b:
        real_BxL = real_BxL & (b["example_mask"][:, None] > 0)
    return b["input_ids"][:, 1:][real_BxL]


def next_token_baselines(train_batches: Iterable[dict], eval_batches: Iterable[dict]) -> dict:
    """Held-out next-token accuracy of always predicting the most frequent training target:
    the bar a left-to-right LM must clear to have used its left context."""
    counts: collections.Counter = collections.Counter()
    for b in train_batches:
        counts.update(_next_tokens(b).tolist())
    if not counts:
        raise ValueError("no next-token targets in the batches")
    top = counts.most_common(1)[0][0]
    hits = total = 0
    for b in eval_batches:
        targets = _next_tokens(b)
        hits += int(np.sum(targets == top))
        total += targets.size
    return {"unigram": hits / max(total, 1)}
