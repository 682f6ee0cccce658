"""Masked LM alone on BERT's two-segment data: the paper's "No NSP" ablation (the pairs and
segment ids stay, the next-sentence head and loss go)."""

from __future__ import annotations

from bert_jax.objectives.base import Objective, TokenMasking


def loss(outputs, batch):
    from bert_jax.objectives import losses  # JAX: loaded by training only, not by the data pipeline

    return losses.masked_lm_and_sentence(outputs, batch, None)


OBJECTIVE = Objective(
    name="mlm",
    description="masked LM only, on sentence pairs (No NSP)",
    pairing="sentence_pairs",
    masking=TokenMasking(),
    heads=("mlm",),
    loss=loss,
    packable=True,
)
