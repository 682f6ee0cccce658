"""ELECTRA's replaced-token detection (Clark et al. 2020): a small generator does masked LM on
15% of the tokens (85% -> [MASK], 15% kept, no random tokens), its samples replace them, and the
discriminator tells for every real token whether it was replaced. Loss = generator MLM + 50 x
the discriminator's sigmoid cross-entropy averaged over all non-padding tokens. The model is
`bert_jax.arch.electra.model.ElectraForPreTraining` (the pretraining task builds it for this
objective); the data are packed segments without a sentence label, as ELECTRA's."""

from __future__ import annotations

from bert_jax.objectives.base import Objective, TokenMasking

DISCRIMINATOR_WEIGHT = 50.0


def loss(outputs, batch):
    from bert_jax.objectives import losses  # JAX: loaded by training only, not by the data pipeline

    return losses.replaced_token_detection(outputs, batch, DISCRIMINATOR_WEIGHT)


OBJECTIVE = Objective(
    name="electra",
    architecture="electra",
    description="replaced-token detection with a masked-LM generator (ELECTRA)",
    pairing="packed",
    masking=TokenMasking(mask_prob=0.85, random_prob=0.0),
    heads=("mlm", "rtd"),
    loss=loss,
    data_flag="electra",
)
