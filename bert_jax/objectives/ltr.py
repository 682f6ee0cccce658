"""The paper's "LTR & No NSP" ablation: a left-to-right language model on BERT's two-segment data.

Attention is causal (each position sees itself and what precedes it), in pretraining and, since
the flag is part of the saved model config, in fine-tuning too (the paper found that dropping the
constraint at fine-tuning hurt). Every real token after [CLS] is a target, predicted from the
position before it; nothing is masked and there is no sentence-pair loss. Under causal attention
[CLS] sees only itself, so sentence-level heads of a causal model read the last real token
(bert_jax.arch.bert.model); the paper does not say which position it used.
"""

from __future__ import annotations

from bert_jax.objectives.base import Objective


def loss(outputs, batch):
    from bert_jax.objectives import losses  # JAX: loaded by training only, not by the data pipeline

    return losses.next_token(outputs, batch)


OBJECTIVE = Objective(
    name="ltr",
    description="left-to-right LM, causal attention, no NSP (LTR & No NSP)",
    pairing="sentence_pairs",
    masking=None,
    heads=("ltr",),
    loss=loss,
    causal=True,
)
