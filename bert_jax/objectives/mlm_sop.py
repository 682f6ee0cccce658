"""ALBERT's objective: masked LM on n-gram spans (n <= 3, P(n) proportional to 1/n) +
sentence-order prediction. Both segments are consecutive text of one document; with p = 0.5
they are swapped (label 1). A chunk of a single sentence still takes its B from another
document, as ALBERT's data code does."""

from __future__ import annotations

from bert_jax.objectives.base import Objective, TokenMasking


def loss(outputs, batch):
    from bert_jax.objectives import losses  # JAX: loaded by training only, not by the data pipeline

    return losses.masked_lm_and_sentence(outputs, batch, "sentence_order")


OBJECTIVE = Objective(
    name="mlm_sop",
    description="masked LM + sentence-order prediction (ALBERT)",
    pairing="swapped_pairs",
    masking=TokenMasking(max_ngram=3),  # ALBERT's n-gram masking, P(n) proportional to 1/n
    heads=("mlm", "sop"),
    loss=loss,
    label_statistic="swapped_order_fraction",
    data_flag="sop",
    packable=True,
)
