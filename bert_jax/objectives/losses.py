"""Loss terms the objectives combine, as google-research/bert's run_pretraining.py computes them.

MLM: cross-entropy at the masked positions, weighted by `masked_lm_weights` and normalised by
their sum + 1e-5. Sentence pair (NSP or SOP): mean cross-entropy over the real examples.
Accuracies are weighted means; every metric is a float32 scalar. This module imports JAX; the
objective modules import it only when a loss is computed.

Gradient accumulation: a weighted mean over one microbatch is not the full batch's mean when
microbatches hold different numbers of masked tokens (or real examples). `full_batch_denominators`
gives each mean's denominator over the whole batch; the trainer hands every microbatch 1/n of it
under `DENOMINATORS`, so the average of the n microbatch losses is exactly the full-batch loss.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

# batch key: {"masked_lm" | "sentence" | "next_token" | "token": scalar}
DENOMINATORS = "loss_denominators"


def _next_token_weights(batch) -> jax.Array:
    weights_BxL = batch["input_mask"][:, 1:].astype(jnp.float32)
    if "example_mask" in batch:
        weights_BxL = weights_BxL * batch["example_mask"][:, None].astype(jnp.float32)
    return weights_BxL


def _token_weights(batch) -> jax.Array:
    """1 for every real (non-padding) token of a real example."""
    weights_BxL = batch["input_mask"].astype(jnp.float32)
    if "example_mask" in batch:
        weights_BxL = weights_BxL * batch["example_mask"][:, None].astype(jnp.float32)
    return weights_BxL


def sentence_weights(batch) -> jax.Array:
    """The weight of every sentence label: B (1 = real example, 0 = eval padding), or B x S for
    packed rows (1 where slot s holds an instance: its id s + 1 occurs in `pack_ids`)."""
    labels = batch["next_sentence_labels"]
    weights = jnp.ones(labels.shape, jnp.float32)
    if labels.ndim == 2 and "pack_ids" in batch:
        ids_S = jnp.arange(1, labels.shape[1] + 1, dtype=batch["pack_ids"].dtype)
        present_BxS = jnp.any(batch["pack_ids"][:, None, :] == ids_S[None, :, None], axis=-1)
        weights = present_BxS.astype(jnp.float32)
    if "example_mask" in batch:
        mask = batch["example_mask"].astype(jnp.float32)
        weights = weights * mask.reshape(mask.shape + (1,) * (labels.ndim - 1))
    return weights


def full_batch_denominators(batch) -> dict[str, jax.Array]:
    """Every weighted mean's denominator over `batch` (only those whose inputs it holds)."""
    out = {}
    if "masked_lm_weights" in batch:
        out["masked_lm"] = jnp.sum(batch["masked_lm_weights"].astype(jnp.float32)) + 1e-5
    if "next_sentence_labels" in batch:
        out["sentence"] = jnp.maximum(jnp.sum(sentence_weights(batch)), 1.0)
    if "input_mask" in batch:
        out["next_token"] = jnp.sum(_next_token_weights(batch)) + 1e-5
        out["token"] = jnp.sum(_token_weights(batch)) + 1e-5
    return out


def _given_denominator(batch, name: str) -> jax.Array | None:
    return batch.get(DENOMINATORS, {}).get(name)


def masked_lm_loss(
    logits_BxPxV: jax.Array,
    ids_BxP: jax.Array,
    weights_BxP: jax.Array,
    denom: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """`denom` defaults to this batch's weight sum + 1e-5 (see the module note on accumulation)."""
    logits_BxPxV = logits_BxPxV.astype(jnp.float32)
    weights_BxP = weights_BxP.astype(jnp.float32)
    ce_BxP = optax.softmax_cross_entropy_with_integer_labels(logits_BxPxV, ids_BxP)
    if denom is None:
        denom = jnp.sum(weights_BxP) + 1e-5
    loss = jnp.sum(ce_BxP * weights_BxP) / denom
    correct_BxP = (jnp.argmax(logits_BxPxV, -1) == ids_BxP).astype(jnp.float32)
    acc = jnp.sum(correct_BxP * weights_BxP) / denom
    return loss, {"masked_lm_loss": loss, "masked_lm_accuracy": acc}


def sentence_loss(
    logits_Bx2: jax.Array,
    labels_B: jax.Array,
    mask_B: jax.Array | None = None,
    prefix: str = "next_sentence",
    denom: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Mean over real examples (`mask_B` 1; eval padding 0). Packed rows: B x S x 2 logits, B x S
    labels and mask (`sentence_weights`), flattened to one example per slot."""
    logits_Bx2 = logits_Bx2.astype(jnp.float32).reshape(-1, logits_Bx2.shape[-1])
    labels_B = labels_B.reshape(-1)
    mask_B = (
        jnp.ones(labels_B.shape, jnp.float32) if mask_B is None
        else mask_B.astype(jnp.float32).reshape(-1)
    )  # fmt: skip
    if denom is None:
        denom = jnp.maximum(jnp.sum(mask_B), 1.0)
    ce_B = optax.softmax_cross_entropy_with_integer_labels(logits_Bx2, labels_B)
    loss = jnp.sum(ce_B * mask_B) / denom
    acc = jnp.sum((jnp.argmax(logits_Bx2, -1) == labels_B).astype(jnp.float32) * mask_B) / denom
    return loss, {f"{prefix}_loss": loss, f"{prefix}_accuracy": acc}


def masked_lm_and_sentence(
    outputs, batch, sentence_head: str | None
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """MLM loss plus, with a sentence head, its pair loss (metrics named after the head)."""
    loss, metrics = masked_lm_loss(
        outputs.mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"],
        _given_denominator(batch, "masked_lm"),
    )  # fmt: skip
    if sentence_head is not None:
        pair_loss, pair_metrics = sentence_loss(
            outputs.nsp_logits, batch["next_sentence_labels"], sentence_weights(batch),
            prefix=sentence_head, denom=_given_denominator(batch, "sentence"),
        )  # fmt: skip
        loss = loss + pair_loss
        metrics.update(pair_metrics)
    metrics["loss"] = loss
    return loss, metrics


def next_token(outputs, batch) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Left-to-right LM: the logits at position t predict the token at t + 1, for every real
    token after the first (eval padding rows have no real tokens)."""
    logits_BxLxV = outputs.mlm_logits[:, :-1]
    targets_BxL = batch["input_ids"][:, 1:]
    loss, metrics = masked_lm_loss(
        logits_BxLxV, targets_BxL, _next_token_weights(batch),
        _given_denominator(batch, "next_token"),
    )  # fmt: skip
    metrics = {"lm_loss": metrics["masked_lm_loss"], "lm_accuracy": metrics["masked_lm_accuracy"]}
    metrics["loss"] = loss
    return loss, metrics


def rank_auc(scores_N: jax.Array, positive_N: jax.Array, weights_N: jax.Array) -> jax.Array:
    """The area under the ROC curve of `scores_N` for telling `positive_N` from the rest, over
    the entries with weight 1 (Mann-Whitney: the chance that a positive outscores a negative,
    ties counted half). It does not depend on a threshold, so it shows a discriminator that
    ranks replaced tokens above originals while none of them yet crosses 0.5. 0.5 when the
    entries hold no positive or no negative."""
    real_N = weights_N > 0
    scores_N = jnp.where(real_N, scores_N.astype(jnp.float32), -jnp.inf)  # padding ranks last
    sorted_N = jnp.sort(scores_N)
    below_N = jnp.searchsorted(sorted_N, scores_N, side="left")  # ties share their mean rank
    upto_N = jnp.searchsorted(sorted_N, scores_N, side="right")
    n_pad = jnp.sum(~real_N)
    rank_N = (below_N + upto_N + 1) / 2.0 - n_pad  # 1-based among the real entries
    pos_N = (positive_N > 0) & real_N
    n_pos = jnp.sum(pos_N).astype(jnp.float32)
    n_neg = jnp.sum(real_N).astype(jnp.float32) - n_pos
    u = jnp.sum(jnp.where(pos_N, rank_N, 0.0)) - n_pos * (n_pos + 1.0) / 2.0
    return jnp.where(n_pos * n_neg > 0, u / jnp.maximum(n_pos * n_neg, 1.0), 0.5)


def replaced_token_detection(
    outputs, batch, discriminator_weight: float
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """ELECTRA: the generator's MLM loss + `discriminator_weight` x the discriminator's sigmoid
    cross-entropy over every real token (`outputs` is an `ElectraOutput`). The metrics include
    the all-original baseline, the accuracy of a discriminator that always says "original",
    and the generator's accuracy at the masked positions whose input hides the original ([MASK]
    or a random id: `masked_lm_hidden_accuracy`), which copying the shown token cannot reach,
    and the discriminator's `replaced_token_auc` (`rank_auc` over the batch's real tokens)."""
    loss, metrics = masked_lm_loss(
        outputs.mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"],
        _given_denominator(batch, "masked_lm"),
    )  # fmt: skip
    ids_BxP = batch["masked_lm_ids"]
    shown_BxP = jnp.take_along_axis(batch["input_ids"], batch["masked_lm_positions"], 1) == ids_BxP
    hidden_BxP = batch["masked_lm_weights"].astype(jnp.float32) * (1.0 - shown_BxP)
    right_BxP = (jnp.argmax(outputs.mlm_logits, -1) == ids_BxP).astype(jnp.float32)
    metrics["masked_lm_hidden_accuracy"] = jnp.sum(right_BxP * hidden_BxP) / (
        jnp.sum(hidden_BxP) + 1e-5
    )
    weights_BxL = _token_weights(batch)
    denom = _given_denominator(batch, "token")
    if denom is None:
        denom = jnp.sum(weights_BxL) + 1e-5
    logits_BxL = outputs.disc_logits.astype(jnp.float32)
    replaced_BxL = outputs.replaced.astype(jnp.float32)
    bce_BxL = optax.sigmoid_binary_cross_entropy(logits_BxL, replaced_BxL)
    disc_loss = jnp.sum(bce_BxL * weights_BxL) / denom
    predicted_BxL = (logits_BxL > 0).astype(jnp.float32)
    correct_BxL = (predicted_BxL == replaced_BxL).astype(jnp.float32)
    metrics.update(
        replaced_token_loss=disc_loss,
        replaced_token_accuracy=jnp.sum(correct_BxL * weights_BxL) / denom,
        replaced_token_baseline=jnp.sum((1.0 - replaced_BxL) * weights_BxL) / denom,
        replaced_token_fraction=jnp.sum(replaced_BxL * weights_BxL) / denom,
        replaced_token_auc=rank_auc(
            logits_BxL.reshape(-1), replaced_BxL.reshape(-1), weights_BxL.reshape(-1)
        ),
    )
    loss = loss + discriminator_weight * disc_loss
    metrics["loss"] = loss
    return loss, metrics
