"""ELECTRA's discriminator without context: a detector that sees each token alone.

Its generator's samples are not unigram draws, so which token stands at a position already says
something about whether it was replaced (a token the generator over-samples is often a
replacement; one it never samples, never). `token_alone_bars` scores each corrupted held-out
token by that token's replaced rate on training batches corrupted by the same generator: a
discriminator that uses context should beat it, in loss and in ROC AUC."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import jax
import numpy as np

TRAIN_BATCHES = 50  # 50 x 32 x 128 tokens: about 50 per vocabulary entry at the cpu scale


def token_alone_bars(task: Any, trainer: Any, params: Any) -> dict[str, float]:
    """The discriminator's bars without context: each (corrupted) held-out token scored by how
    often that token was a replacement on `TRAIN_BATCHES` training batches, as a ROC AUC and
    as the log loss of that rate. The corruption is the evaluation's own (the same generator
    sampling key)."""
    from sklearn.metrics import log_loss, roc_auc_score

    rngs = task.family.pretraining_rngs(jax.random.PRNGKey(0), True)

    @jax.jit
    def corrupt(params: Any, batch: dict) -> tuple[jax.Array, jax.Array]:
        out = task.model.apply({"params": params}, **task.model_inputs(batch),
                               deterministic=True, rngs=rngs)  # fmt: skip
        return out.sampled_ids, out.replaced

    def tokens(batches: Iterable[dict]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for batch in batches:
            host = jax.device_get(batch)
            inputs = {k: batch[k] for k in trainer.batch_shardings}
            sampled_BxP, replaced_BxL = jax.device_get(corrupt(params, inputs))
            ids_BxL = np.array(host["input_ids"])
            b, p = np.nonzero(np.asarray(host["masked_lm_weights"]) > 0)
            ids_BxL[b, np.asarray(host["masked_lm_positions"])[b, p]] = sampled_BxP[b, p]
            real_BxL = np.asarray(host["input_mask"]) > 0
            if "example_mask" in host:
                real_BxL &= np.asarray(host["example_mask"])[:, None] > 0
            yield ids_BxL[real_BxL], np.asarray(replaced_BxL)[real_BxL]

    vocab = task.bert_config.vocab_size
    seen, replaced = np.zeros(vocab), np.zeros(vocab)
    for ids, labels in tokens(itertools.islice(task.train_input(trainer), TRAIN_BATCHES)):
        np.add.at(seen, ids, 1.0)
        np.add.at(replaced, ids, labels.astype(np.float64))
    prior = replaced.sum() / seen.sum()  # unseen tokens get the overall rate
    rate = (replaced + prior) / (seen + 1.0)
    held = list(tokens(itertools.islice(task.eval_input(trainer), task.max_eval_steps)))
    ids = np.concatenate([i for i, _ in held])
    labels = np.concatenate([y for _, y in held])
    return {"token_alone_auc": float(roc_auc_score(labels, rate[ids])),
            "token_alone_loss": float(log_loss(labels, rate[ids]))}  # fmt: skip
