"""How a fine-tuning run's model starts: chosen once per job by `runs.finetune.finetune`, so
each run (seed, sweep point) trains what it is handed without asking the config again.

- `FineTuned`: the task's model with fresh heads and the checkpoint's encoder grafted in (all of
  it fresh with `random_init`); `head_learning_rate` scales the heads' updates.
- `Distilled`: `FineTuned` for a student (`bert_jax.tasks.distill.student_setup.Distillation`):
  the student's Task wraps the task's, and an online teacher's weights join the initial params.
- `FeatureBased` (the paper's Table 7): the frozen encoder's last four layers are features, and
  a BiLSTM tagger is trained on them.

`model_start` reads the config once per job; each run's `start(job, encoder, pre, batch, seed,
learning_rate)` returns the training Task, its training arrays and the initial params (None:
the Task's own init). `encoder_config` is the job's encoder: the checkpoint's, with the
config's dropout and attention kernel."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np

from bert_jax.arch import registry
from bert_jax.arch.bert.pretrained import graft_encoder
from bert_jax.errors import BertJaxError
from bert_jax.tasks import feature_ner
from bert_jax.tasks.distill.student_setup import Distillation
from bert_jax.tasks.fresh_params import fresh_params


@dataclasses.dataclass(frozen=True)
class Start:
    task: Any  # the training Task (bert_jax.train.task)
    train: dict[str, np.ndarray]  # its training arrays
    init: Any  # initial params, or None for the Task's own init


@dataclasses.dataclass(frozen=True)
class FineTuned:
    family: registry.Architecture
    head_learning_rate: float = 0.0  # > 0: the heads' own rate (checked up front)
    random_init: bool = False  # the encoder too starts fresh (the "random init" baseline)

    def task(self, job: Any, encoder: Any, batch: int, learning_rate: float) -> Any:
        task = job.train_task(encoder, batch)
        if self.head_learning_rate:
            task.head_lr_scale = self.head_learning_rate / learning_rate
            task.encoder_scope = self.family.encoder_scope
        return task

    def init(self, task: Any, encoder: Any, pre: Any, seed: int) -> Any:
        scope = self.family.encoder_scope
        init = fresh_params(task, seed, encoder.initializer_range,
                            random_encoder=self.random_init, encoder_scope=scope)  # fmt: skip
        return init if self.random_init else graft_encoder(init, pre.params, scope)

    def start(
        self, job: Any, encoder: Any, pre: Any, batch: int, seed: int, learning_rate: float
    ) -> Start:
        task = self.task(job, encoder, batch, learning_rate)
        return Start(task, job.train, self.init(task, encoder, pre, seed))


@dataclasses.dataclass(frozen=True)
class Distilled(FineTuned):
    distill: Distillation | None = None

    def task(self, job: Any, encoder: Any, batch: int, learning_rate: float) -> Any:
        return self.distill.wrap(super().task(job, encoder, batch, learning_rate))

    def init(self, task: Any, encoder: Any, pre: Any, seed: int) -> Any:
        return self.distill.add_teacher(super().init(task, encoder, pre, seed))


@dataclasses.dataclass(frozen=True)
class FeatureBased:
    max_seq_length: int
    lstm_size: int  # units per direction of the BiLSTM

    def start(
        self, job: Any, encoder: Any, pre: Any, batch: int, seed: int, learning_rate: float
    ) -> Start:
        del seed, learning_rate  # the tagger takes its init from its own Task
        task, train = feature_ner.prepare(job, encoder, pre.params["bert"], batch,
                                          self.max_seq_length, self.lstm_size)  # fmt: skip
        return Start(task, train, None)


def model_start(
    cfg: Any, family: registry.Architecture, distill: Distillation | None
) -> FineTuned | FeatureBased:
    """The start every run of this job takes, with the config's values it needs."""
    if cfg.get("feature_based", False):
        return FeatureBased(int(cfg.max_seq_length), int(cfg.lstm_size))
    head_lr, random = float(cfg.get("head_learning_rate", 0.0)), bool(cfg.random_init)
    if distill:
        return Distilled(family, head_lr, random, distill)
    return FineTuned(family, head_lr, random)


def encoder_config(
    pre_config: Any, family: registry.Architecture, dtype: Any, rate: float | None, kernel: str
) -> Any:
    """The checkpoint's encoder config in the run's dtype, with config.dropout (`rate`, None:
    the checkpoint's) and config.attention_implementation (`kernel`) applied where the
    architecture has them."""
    encoder = pre_config.replace(dtype=dtype)
    if rate is not None:
        fields = ("hidden_dropout_prob", "attention_probs_dropout_prob")
        if not all(hasattr(encoder, f) for f in fields):
            raise BertJaxError(f"config.dropout: {family.title} names its dropout otherwise; "
                               "leave it unset (None: the checkpoint's)")  # fmt: skip
        if not 0.0 <= rate < 1.0:
            raise BertJaxError(f"config.dropout={rate}: must be in [0, 1)")
        encoder = encoder.replace(**dict.fromkeys(fields, float(rate)))
    if kernel != "xla":
        if not hasattr(encoder, "attention_implementation"):  # XLNet, T5: their own attention
            raise BertJaxError(f"attention_implementation {kernel!r}: {family.name} has only xla")
        if getattr(encoder, "attention_probs_dropout_prob", 0):  # a kernel keeps no probabilities
            logging.warning("attention_implementation %s: attention dropout %s -> 0 (the "
                            "kernel keeps no probabilities to drop)", kernel,
                            encoder.attention_probs_dropout_prob)  # fmt: skip
            encoder = encoder.replace(attention_probs_dropout_prob=0.0)
        encoder = encoder.replace(attention_implementation=kernel)
    return encoder
