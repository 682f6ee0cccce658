"""One fine-tuning step of each task head of ours equals transformers' on identical weights: the
loss, every parameter's gradient (<= 1e-5 of its norm) and the parameters after one clip + AdamW
step against torch.optim.AdamW with the reference's decay exclusions.

Ours (bert_jax.tasks.train_tasks) against transformers' class, loaded from our export with the
head (`task_heads.task_head` + `export_hf(task=...)`):
- ClassificationTask, 3 classes: BertForSequenceClassification (mean cross-entropy over examples);
- ClassificationTask, num_labels=1 (STS-B): BertForSequenceClassification regression (mean MSE);
- TaggingTask: BertForTokenClassification; ours weights the tokens by `label_weights` (only first
  sub-tokens, as the reference), transformers gets labels -100 where the weight is 0;
- SpanTask: BertForQuestionAnswering, (CE(start) + CE(end)) / 2;
- ClassificationTask with num_choices: BertForMultipleChoice (B x C x L inputs, CE over choices).
A tagging loss of ours normalised by every token slot instead of the labelled tokens must fail.

Two things are set aside from the comparison and checked on their own:
- transformers' word embeddings are nn.Embedding(padding_idx=0), which never updates the [PAD]
  row; the reference (google-research/bert's embedding_lookup is a plain gather) and ours do. The
  row's gradient is zero wherever padding cannot reach the loss, but SQuAD's start/end softmaxes
  run over every position, padding included (run_squad.py, and transformers' too), so there it is
  not: the comparison turns padding_idx off, the reference's choice.
- gradients that are analytically zero (a bias shared by every logit of one softmax) are rounding
  noise on both sides at the scale of the softmax terms that cancel, not of the whole gradient.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest
import torch
import transformers
from step_parity import (
    GRAD_FLOOR,
    StepReport,
    encoder_batch,
    hf_model,
    hf_tensors,
    long,
    perturbed,
    step_parity,
    torch_grads,
)
from step_parity import (
    TINY_SIZE as SIZE,
)

from bert_jax.arch.bert.task_heads import task_head
from bert_jax.config import preset
from bert_jax.tasks.train_tasks import ClassificationTask, SpanTask, TaggingTask, cross_entropy

VOCAB, B, L, CHOICES = 300, 4, 16, 3
RNG = jax.random.PRNGKey(0)

# Analytically zero gradients: a bias added to every logit of one softmax (QA's start and end
# biases and, through the linear qa_outputs, the last LayerNorm's shift; multiple choice's
# one-output classifier bias, common to all choices). Measured up to 1.5e-8 absolute on
# transformers' side, 0 on ours: 2.4e-4 of the GRAD_FLOOR bound, so these are held to ZERO_TOL of
# it instead, 1e-6 of the whole gradient's norm (the smallest real bias gradient here, a query
# bias's, is 2e-4 of it).
ANALYTIC_ZEROS = {
    "span": ("qa_outputs.bias", "bert.encoder.layer.1.output.LayerNorm.bias"),
    "multiple_choice": ("classifier.bias",),
}
ZERO_TOL = 1e-2

# Measured (CPU, float32), loss relative / gradient of its norm / step in lr:
#   classification   1.1e-7 / 4.5e-7 / 1.2e-5
#   regression       0      / 2.0e-7 / 1.2e-5
#   tagging          4.4e-7 / 3.6e-7 / 1.2e-5  (ours divides by the weight sum + 1e-5)
#   span             0      / 4.7e-7 / 1.2e-5
#   multiple_choice  1.1e-7 / 1.2e-6 / 1.2e-5
# 1.2e-5 lr is one float32 ulp of a LayerNorm scale near 1. The broken tagging loss: loss 0.45
# relative, gradient 0.28 of norm. With transformers' padding_idx left on, span's word embeddings
# fail at 0.27 of their norm (the [PAD] row).


@dataclasses.dataclass(frozen=True)
class Case:
    make: Callable[[Any], Any]  # BertConfig -> our task
    run_family: str  # the fine-tuning task_family task_head reads ("glue", "ner", ...)
    hf_class: str
    labels: tuple[str, ...] = ()  # id2label: sets transformers' num_labels


CASES = {
    "classification": Case(lambda c: ClassificationTask(c, B, L, num_labels=3), "glue",
                           "BertForSequenceClassification", ("a", "b", "c")),
    "regression": Case(lambda c: ClassificationTask(c, B, L, num_labels=1), "glue",
                       "BertForSequenceClassification", ("score",)),
    "tagging": Case(lambda c: TaggingTask(c, B, L, num_labels=5), "ner",
                    "BertForTokenClassification", ("O", "B-X", "I-X", "B-Y", "I-Y")),
    "span": Case(lambda c: SpanTask(c, B, L), "squad", "BertForQuestionAnswering"),
    "multiple_choice": Case(lambda c: ClassificationTask(c, B, L, num_choices=CHOICES), "swag",
                            "BertForMultipleChoice"),
}  # fmt: skip


def _batch(case: str) -> dict[str, np.ndarray]:
    """Inputs with padding rows; labels of each task (tagging: weight 0 on padding, [CLS] and
    about a third of the real tokens, whose labels are arbitrary and must not count)."""
    rs = np.random.RandomState(1)
    enc = encoder_batch(VOCAB, batch=B, seq_len=L)
    inputs = {k: enc[k] for k in ("input_ids", "input_mask", "segment_ids")}
    mask = enc["input_mask"]
    if case == "multiple_choice":  # choice c: row c's padding pattern, its own tokens
        inputs = {k: np.stack([np.roll(v, c, axis=0) for c in range(CHOICES)], 1)
                  for k, v in inputs.items()}  # fmt: skip
        inputs["input_ids"] = rs.randint(5, VOCAB, (B, CHOICES, L)) * inputs["input_mask"]
        return inputs | {"labels": np.array([0, 2, 1, 2], np.int32)}
    if case == "classification":
        return inputs | {"labels": np.array([0, 2, 1, 2], np.int32)}
    if case == "regression":
        return inputs | {"labels": rs.uniform(0, 5, B).astype(np.float32)}
    if case == "tagging":
        weights = mask * (rs.uniform(size=(B, L)) < 0.7)
        weights[:, 0] = 0
        labels = rs.randint(0, 5, (B, L)).astype(np.int32)
        return inputs | {"labels": labels, "label_weights": weights.astype(np.float32)}
    lengths = mask.sum(1)
    start = np.array([rs.randint(1, n) for n in lengths], np.int32)
    end = np.array([rs.randint(s, n) for s, n in zip(start, lengths, strict=True)], np.int32)
    return inputs | {"start_positions": start, "end_positions": end}


@functools.cache  # one set-up per case for the module
def _task(case: str) -> tuple[Any, dict[str, np.ndarray], dict]:
    config = preset("tiny", **SIZE, vocab_size=VOCAB, max_position_embeddings=64)
    task = CASES[case].make(config)
    batch = _batch(case)
    # Jitted: op-by-op, init and the noise compile every primitive of every shape.
    init = jax.jit(lambda k: perturbed(task.model.init(k, **task.model_inputs(batch))["params"]))
    return task, batch, init(jax.random.PRNGKey(0))


def _to_hf(case: str, config: Any) -> Callable[[dict], dict[str, np.ndarray]]:
    """Our tree (weights or gradients) -> HF names, the head built from the same tree."""
    c = CASES[case]

    def to_hf(tree: dict) -> dict[str, np.ndarray]:
        run = {"task_family": c.run_family}
        head = task_head(run, jax.device_get(tree), config, labels=c.labels)
        return hf_tensors(config, tree, task=head)

    return to_hf


def _torch_loss(case: str, batch: dict) -> Callable[[torch.nn.Module], torch.Tensor]:
    inputs = dict(input_ids=long(batch["input_ids"]), attention_mask=long(batch["input_mask"]),
                  token_type_ids=long(batch["segment_ids"]))  # fmt: skip
    if case == "regression":
        extra = dict(labels=torch.tensor(batch["labels"]))  # float: MSE
    elif case == "tagging":  # unweighted tokens are ignored
        extra = dict(labels=long(np.where(batch["label_weights"] > 0, batch["labels"], -100)))
    elif case == "span":
        extra = dict(start_positions=long(batch["start_positions"]),
                     end_positions=long(batch["end_positions"]))  # fmt: skip
    else:
        extra = dict(labels=long(batch["labels"]))
    return lambda model: model(**inputs, **extra).loss


def _hf(case: str, train_pad_row: bool = True) -> torch.nn.Module:
    """transformers' class for `case` with our weights and head; `train_pad_row`: padding_idx off,
    so that the [PAD] row gets its gradient as in the reference."""
    task, _, params = _task(case)
    config, c = task.bert_config, CASES[case]
    head = task_head({"task_family": c.run_family}, jax.device_get(params), config, labels=c.labels)
    model = hf_model(config, params, getattr(transformers, c.hf_class), task=head)
    embeddings = model.bert.embeddings.word_embeddings
    assert embeddings.padding_idx == 0  # transformers' default (pad_token_id)
    if train_pad_row:
        embeddings.padding_idx = None
    return model


def _run(case: str, broken: Callable | None = None) -> StepReport:
    """`broken(task, batch)`: a loss of ours to use instead of the task's. Analytically zero
    gradients are held to ZERO_TOL here and left out of the report."""
    task, batch, params = _task(case)
    ours = broken(task, batch) if broken else (lambda p: task.loss_fn(p, batch, RNG, True))
    report = step_parity(ours, params, _to_hf(case, task.bert_config), _hf(case),
                         _torch_loss(case, batch))  # fmt: skip
    zeros = {k: report.grad_errors.pop(k) for k in ANALYTIC_ZEROS.get(case, ())}
    assert all(v <= ZERO_TOL for v in zeros.values()), zeros
    return report


@pytest.mark.parametrize("case", list(CASES))
def test_head_step_matches_transformers(case: str) -> None:
    task = _task(case)[0]
    if case == "regression":  # transformers picks MSE for num_labels == 1, as ours
        assert task.is_regression
    report = _run(case)
    report.check()
    print(case, report.worst())


@pytest.mark.parametrize("case", list(ANALYTIC_ZEROS))
def test_what_the_comparison_sets_aside(case: str) -> None:
    """On transformers' side: the analytically zero gradients are rounding noise (<= 1e-6 of the
    whole gradient's norm); padding_idx keeps the [PAD] row's gradient at zero, where in SQuAD
    the row takes a large share of it without."""
    _, batch, _ = _task(case)
    _, frozen = torch_grads(_hf(case, train_pad_row=False), _torch_loss(case, batch))
    _, trained = torch_grads(_hf(case), _torch_loss(case, batch))
    total = np.sqrt(sum(np.sum(np.square(g, dtype=np.float64)) for g in trained.values()))
    for name in ANALYTIC_ZEROS[case]:
        assert np.abs(trained[name]).max() <= ZERO_TOL * GRAD_FLOOR * total, name
    word = "bert.embeddings.word_embeddings.weight"
    assert not frozen[word][0].any()
    if case == "span":  # padding positions are in the start/end softmaxes
        assert np.linalg.norm(trained[word][0]) > 0.1 * np.linalg.norm(trained[word])


def _tagging_over_every_slot(task: TaggingTask, batch: dict) -> Callable:
    """Broken on purpose: the weighted token loss divided by all B x L slots."""

    def loss(p: dict) -> tuple[jax.Array, dict]:
        logits_BxLxC = task.apply(p, batch, None, True)
        w_BxL = batch["label_weights"]
        value = (cross_entropy(logits_BxLxC, batch["labels"]) * w_BxL).sum() / w_BxL.size
        return value, {}

    return loss


def test_a_broken_loss_fails_the_comparison() -> None:
    report = _run("tagging", _tagging_over_every_slot)
    failures = report.failures()
    assert any(f.startswith("loss") for f in failures)
    assert any(f.startswith("gradient ") for f in failures)
    print("broken:", report.worst())
