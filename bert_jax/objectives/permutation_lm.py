"""XLNet's permutation language model on BERT's two-segment shards, re-laid out dynamically.

The shards are the `sentence_pairs` ones every BERT objective reads ([CLS] A [SEP] B [SEP]); the
input pipeline turns each row into XLNet's layout, A [SEP] B [SEP] [CLS] with segment ids 0, 1
and 2 for [CLS] (only "same segment or not" reaches the model), then draws, per example and
deterministically from (seed, example index):

- span-based targets (XLNet `_sample_mask`): n-grams of whole words, n in 1..5 with p ~ 1/n,
  each placed inside a context of n * alpha / beta tokens (alpha=6, beta=1), until about 1/K of
  the real tokens (K=6; at most `max_predictions_per_seq`) are targets; [SEP]/[CLS] never are;
- a factorisation order (a uniform permutation of the positions; XLNet's `_local_perm` with
  perm_size = seq length) and from it `perm_mask` (1 = may not attend): non-target tokens take
  the smallest rank, so every position sees them and they see no target; a target sees the
  targets (and [SEP]/[CLS]) earlier in the order and never itself in the query stream.

Because all non-targets precede all targets, predicting exactly the targets is XLNet's partial
prediction: only the last ~1/K of the factorisation order is predicted. Targets are stored under
the masked-LM names (`masked_lm_positions/ids/weights`, the ids unchanged in `input_ids`), so
the loss denominators, gradient accumulation and evaluation weights are the MLM ones; the model
builds `target_mapping` from the positions. Not built: `bi_data`, `reuse_len`/`mem_len` in
pretraining (the model has memory; the loop feeds independent rows), TFRecords of XLNet's own
layout.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_jax.objectives.base import Objective
from bert_jax.tokenization.layout import XLNET_CLS_SEGMENT

NGRAM_P = 1.0 / np.arange(1, 6)
NGRAM_P = NGRAM_P / NGRAM_P.sum()


def to_xlnet_layout(
    ids_BxL: np.ndarray, mask_BxL: np.ndarray, seg_BxL: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[CLS] A [SEP] B [SEP] pad -> A [SEP] B [SEP] [CLS] pad (ids, segments, is_functional)."""
    b, length = ids_BxL.shape
    n_B = mask_BxL.sum(1).astype(np.int64)
    src_BxL = np.arange(length)[None] + 1
    src_BxL = np.where(src_BxL == n_B[:, None], 0, src_BxL)  # [CLS] moves to the last real slot
    src_BxL = np.minimum(src_BxL, length - 1)
    real_BxL = np.arange(length)[None] < n_B[:, None]
    ids = np.where(real_BxL, np.take_along_axis(ids_BxL, src_BxL, 1), ids_BxL)
    seg = np.where(real_BxL, np.take_along_axis(seg_BxL, src_BxL, 1), seg_BxL)
    last_BxL = np.arange(length)[None] == (n_B - 1)[:, None]
    seg = np.where(last_BxL, XLNET_CLS_SEGMENT, seg)
    # [SEP] ends each segment: the token before a segment change (the [CLS] slot included).
    nxt = np.concatenate([seg[:, 1:], seg[:, -1:]], 1)
    func = real_BxL & ((nxt != seg) | last_BxL)
    return ids, seg, func


def span_targets(
    n_real: int, func_L: np.ndarray, word_start_L: np.ndarray, goal: int,
    rng: np.random.Generator, alpha: int = 6, beta: int = 1,
) -> np.ndarray:  # fmt: skip
    """Target positions (bool [L]) chosen as XLNet's `_sample_mask`, on whole words (its
    end-of-span check on the span's own end, not its start: xlnet#220)."""
    target = np.zeros(func_L.shape, bool)
    cur = count = 0
    while cur < n_real and count < goal:
        n = int(rng.choice(5, p=NGRAM_P)) + 1
        ctx = max(n * alpha // beta, n)
        l_ctx = int(rng.integers(ctx - n + 1))
        beg = cur + l_ctx
        while beg < n_real and not word_start_L[beg]:
            beg += 1
        if beg >= n_real:
            break
        end, words = beg + 1, 1
        while end < n_real:
            if word_start_L[end]:
                words += 1
                if words > n:
                    break
            end += 1
        span = np.zeros_like(target)
        span[beg:end] = True
        span &= ~func_L & ~target
        take = np.flatnonzero(span)[: goal - count]
        target[take] = True
        count += len(take)
        cur = end + (ctx - l_ctx - n)
    return target


def perm_mask_for(target_L: np.ndarray, func_L: np.ndarray, rng: np.random.Generator):
    """`perm_mask[i, j] = 1`: i may not attend to j (XLNet `_local_perm`, one block)."""
    length = target_L.shape[0]
    rank_L = rng.permutation(length)
    context_L = ~target_L & ~func_L
    rev_L = np.where(context_L, -1, rank_L)
    self_rev_L = np.where(target_L, rev_L, rev_L + 1)
    return (self_rev_L[:, None] <= rev_L[None, :]) & ~context_L[None, :]


@dataclasses.dataclass(frozen=True)
class XLNetLayout:
    """The dynamic re-layout the input pipeline runs for this objective (`Objective.layout`)."""

    k: int = 6  # about 1/K of the real tokens are predicted
    alpha: int = 6
    beta: int = 1

    def extra_shapes(self, b: int, length: int, p: int) -> dict:
        f32, i32 = np.dtype(np.float32), np.dtype(np.int32)
        return {
            "masked_lm_positions": ((b, p), i32),
            "masked_lm_ids": ((b, p), i32),
            "masked_lm_weights": ((b, p), f32),
            "perm_mask": ((b, length, length), f32),
        }

    def apply(
        self, batch: dict, example_index_B: np.ndarray, p: int, seed: int,
        continuation_ids: tuple[int, ...] = (),
    ) -> dict:  # fmt: skip
        ids, seg, func = to_xlnet_layout(
            batch["input_ids"], batch["input_mask"], batch["segment_ids"]
        )
        b, length = ids.shape
        word_start = ~np.isin(ids, np.asarray(continuation_ids, ids.dtype))
        out = {k: np.zeros(shape, dt) for k, (shape, dt) in self.extra_shapes(b, length, p).items()}
        for r in range(b):
            rng = np.random.default_rng([seed, int(example_index_B[r]), 0x584C4E])
            n_real = int(batch["input_mask"][r].sum())
            goal = min(p, max(1, round((n_real - int(func[r].sum())) / self.k)))
            target = span_targets(n_real, func[r], word_start[r], goal, rng, self.alpha, self.beta)
            pos = np.flatnonzero(target)
            out["masked_lm_positions"][r, : len(pos)] = pos
            out["masked_lm_ids"][r, : len(pos)] = ids[r, pos]
            out["masked_lm_weights"][r, : len(pos)] = 1.0
            out["perm_mask"][r] = perm_mask_for(target, func[r], rng)
        return dict(out, input_ids=ids, segment_ids=seg)


def loss(outputs, batch):
    from bert_jax.objectives import losses  # JAX: loaded by training only, not by the data pipeline

    logits_BxPxV = outputs[0]
    denom = losses._given_denominator(batch, "masked_lm")
    value, metrics = losses.masked_lm_loss(
        logits_BxPxV, batch["masked_lm_ids"], batch["masked_lm_weights"], denom
    )
    return value, {"permutation_lm_loss": value,
                   "permutation_lm_accuracy": metrics["masked_lm_accuracy"]}  # fmt: skip


OBJECTIVE = Objective(
    name="permutation_lm",
    architecture="xlnet",
    description="permutation LM, two-stream attention, span targets, last 1/K (XLNet)",
    pairing="sentence_pairs",
    masking=None,
    heads=("plm",),
    loss=loss,
    layout=XLNetLayout(),
)
