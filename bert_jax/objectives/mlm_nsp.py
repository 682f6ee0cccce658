"""BERT's objective: masked LM + next-sentence prediction on [CLS] A [SEP] B [SEP] pairs, where B
is the true continuation or (p = 0.5, label 1) a span of another document."""

from __future__ import annotations

from bert_jax.objectives.base import Objective, TokenMasking


def loss(outputs, batch):
    from bert_jax.objectives import losses  # JAX: loaded by training only, not by the data pipeline

    return losses.masked_lm_and_sentence(outputs, batch, "next_sentence")


OBJECTIVE = Objective(
    name="mlm_nsp",
    description="masked LM + next-sentence prediction (BERT)",
    pairing="sentence_pairs",
    masking=TokenMasking(),
    heads=("mlm", "nsp"),
    loss=loss,
    label_statistic="random_next_fraction",
    data_flag="nsp",
    packable=True,
)
