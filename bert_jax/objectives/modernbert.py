"""ModernBERT's masked LM (Warner et al. 2024): one segment of contiguous text packed up to the
length limit, no sentence-pair task, and a higher masking rate, 30% of the tokens (80/10/10 as
BERT's). The model is the ModernBERT family's (`bert_jax.arch.modernbert.family`).

The rate is the data's: pretraining configs draw masks at training time with
`dynamic_masking=True, masked_lm_prob=0.3` (bert_jax/configs/modernbert.py); static shards take
`create-pretraining-data --objective=modernbert --masked_lm_prob=0.3`."""

from __future__ import annotations

from bert_jax.objectives.base import Objective, TokenMasking

MASKED_LM_PROB = 0.3


def loss(outputs, batch):
    from bert_jax.objectives import losses  # JAX: loaded by training only, not by the data pipeline

    return losses.masked_lm_and_sentence(outputs, batch, None)


OBJECTIVE = Objective(
    name="modernbert",
    architecture="modernbert",
    description="masked LM at 30% on packed full sentences, no NSP (ModernBERT)",
    pairing="packed",
    masking=TokenMasking(masked_lm_prob=MASKED_LM_PROB),
    heads=("mlm",),
    loss=loss,
    data_flag="modernbert",
    packable=True,
)
