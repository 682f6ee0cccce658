"""BERT Table 5: pretraining tasks. Masked LM with and without NSP, a left-to-right LM (with a
BiLSTM on top at fine-tuning), and the untrained model, on every downstream task."""

from __future__ import annotations

from collections.abc import Iterator

from bert_jax.ablations.scales import Scale
from bert_jax.ablations.tables.base import Arm, Claim, Pretrain, Table
from bert_jax.ablations.tables.compare import RANDOM_INIT, beats, over_random_init

TASKS = ("sst2", "mrpc", "conll", "squad")
# Masked LM's lead over left-to-right: the pair, token and span tasks.
_MLM_OVER_LTR_TASKS = ("mrpc", "conll", "squad")


def arms(scale: Scale) -> list[Arm]:
    model, steps = scale.model, scale.steps
    ltr = Pretrain("ltr", model, steps)
    return [
        Arm("BERT", Pretrain("mlm_nsp", model, steps), TASKS),
        Arm("No NSP", Pretrain("mlm", model, steps), TASKS),
        Arm("LTR & No NSP", ltr, TASKS),
        Arm("+ BiLSTM", ltr, TASKS, bilstm=True),
        Arm(RANDOM_INIT, Pretrain("mlm_nsp", model, 0), TASKS),
    ]


def claims(doc: dict) -> Iterator[Claim]:
    yield from over_random_init(doc)
    for task in _MLM_OVER_LTR_TASKS:
        claim = f"MLM (No NSP) beats LTR & No NSP on {task}"
        yield beats(doc, "No NSP", "LTR & No NSP", task, claim, by_std=False)
    claim = "+ BiLSTM recovers part of LTR's span-task gap (squad above LTR & No NSP)"
    yield beats(doc, "+ BiLSTM", "LTR & No NSP", "squad", claim, by_std=False)


TABLE = Table(
    name="5",
    title="Table 5: pretraining tasks",
    summary="pretraining tasks: BERT, No NSP, LTR & No NSP, + BiLSTM, random init",
    arms=arms,
    # bert_reference.md: the paper's dev results; our "mrpc" stands in for MRPC.
    paper={
        "BERT": {"sst2": 92.7, "mrpc": 86.7, "squad": 88.5},
        "No NSP": {"sst2": 92.6, "mrpc": 86.5, "squad": 87.9},
        "LTR & No NSP": {"sst2": 92.1, "mrpc": 77.5, "squad": 77.8},
        "+ BiLSTM": {"sst2": 91.6, "mrpc": 75.7, "squad": 84.9},
    },
    claims=claims,
)
