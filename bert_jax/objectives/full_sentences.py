"""RoBERTa's FULL-SENTENCES: one segment of contiguous sentences packed up to the length limit
across document boundaries (an extra [SEP] between documents), masked LM only, no NSP."""

from __future__ import annotations

from bert_jax.objectives.base import Objective, TokenMasking


def loss(outputs, batch):
    from bert_jax.objectives import losses  # JAX: loaded by training only, not by the data pipeline

    return losses.masked_lm_and_sentence(outputs, batch, None)


OBJECTIVE = Objective(
    name="full_sentences",
    description="masked LM on packed full sentences (RoBERTa)",
    pairing="packed",
    masking=TokenMasking(),
    heads=("mlm",),
    loss=loss,
    data_flag="full_sentences",
    packable=True,
)
