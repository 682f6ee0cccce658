"""Its objective: masked LM on BERT's sentence-pair shards, trained by this architecture."""

from __future__ import annotations

from bert_jax.objectives.base import Objective, TokenMasking


def loss(outputs, batch):
    from bert_jax.objectives import losses

    return losses.masked_lm_and_sentence(outputs, batch, None)


OBJECTIVE = Objective(
    name="toy_mlm",
    description="masked LM for the bag-of-context toy",
    pairing="sentence_pairs",
    masking=TokenMasking(),
    heads=("mlm",),
    loss=loss,
    architecture="toy",
)
