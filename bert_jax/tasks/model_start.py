"""How a fine-tuning run's model starts: chosen once per job by `runs.finetune.finetune`, so
each run (seed, sweep point) trains what it is handed without asking the config again.

- `FineTuned`: the task's model with fresh heads and the checkpoint's encoder grafted in (all of
  it fresh with `random_init`); `head_learning_rate` scales the heads' updates.
- `Distilled`: `FineTuned` for a student (`bert_jax.tasks.distill.student_setup.Distillation`):
  the student's Task wraps the task's, and an online teacher's weights join the initial params.
- `FeatureBased` (the paper's Table 7): the frozen encoder's last four layers are features, and
  a BiLSTM tagger is trained on them.

`start(cfg, job, encoder, pre, batch)` returns the training Task, its training arrays and the
initial params (None: the Task's own init). `encoder_config` is the run's encoder: the
checkpoint's, with the config's dropout and attention kernel."""

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

    def task(self, cfg: Any, job: Any, encoder: Any, batch: int) -> Any:
        task = job.train_task(encoder, batch)
        if head_lr := cfg.get("head_learning_rate", 0.0):  # checked > 0 up front
            task.head_lr_scale = head_lr / cfg.learning_rate
            task.encoder_scope = self.family.encoder_scope
        return task

    def init(self, cfg: Any, task: Any, encoder: Any, pre: Any) -> Any:
        random = bool(cfg.random_init)
        scope = self.family.encoder_scope
        init = fresh_params(task, cfg.seed, encoder.initializer_range, random_encoder=random,
                            encoder_scope=scope)  # fmt: skip
        return init if random else graft_encoder(init, pre.params, scope)

    def start(self, cfg: Any, job: Any, encoder: Any, pre: Any, batch: int) -> Start:
        task = self.task(cfg, job, encoder, batch)
        return Start(task, job.train, self.init(cfg, task, encoder, pre))


@dataclasses.dataclass(frozen=True)
class Distilled(FineTuned):
    distill: Distillation

    def task(self, cfg: Any, job: Any, encoder: Any, batch: int) -> Any:
        return self.distill.wrap(super().task(cfg, job, encoder, batch))

    def init(self, cfg: Any, task: Any, encoder: Any, pre: Any) -> Any:
        return self.distill.add_teacher(super().init(cfg, task, encoder, pre))


class FeatureBased:
    def start(self, cfg: Any, job: Any, encoder: Any, pre: Any, batch: int) -> Start:
        task, train = feature_ner.prepare(cfg, job, encoder, pre.params["bert"], batch)
        return Start(task, train, None)


def model_start(
    cfg: Any, family: registry.Architecture, distill: Distillation | None
) -> FineTuned | FeatureBased:
    """The start every run of this job takes."""
    if cfg.get("feature_based", False):
        return FeatureBased()
    return Distilled(family, distill) if distill else FineTuned(family)


def encoder_config(cfg: Any, pre_config: Any, family: registry.Architecture) -> Any:
    """The checkpoint's encoder config in the run's dtype, with config.dropout and
    config.attention_implementation applied where the architecture has them."""
    encoder = pre_config.replace(dtype=cfg.dtype)
    if (rate := cfg.get("dropout")) is not None:
        fields = ("hidden_dropout_prob", "attention_probs_dropout_prob")
        if not all(hasattr(encoder, f) for f in fields):
            raise BertJaxError(f"config.dropout: {family.title} names its dropout otherwise; "
                               "leave it unset (None: the checkpoint's)")  # fmt: skip
        if not 0.0 <= rate < 1.0:
            raise BertJaxError(f"config.dropout={rate}: must be in [0, 1)")
        encoder = encoder.replace(**dict.fromkeys(fields, float(rate)))
    if (kernel := cfg.get("attention_implementation", "xla")) != "xla":
        if not hasattr(encoder, "attention_implementation"):  # XLNet, T5: their own attention
            raise BertJaxError(f"attention_implementation {kernel!r}: {family.name} has only xla")
        if getattr(encoder, "attention_probs_dropout_prob", 0):  # a kernel keeps no probabilities
            logging.warning("attention_implementation %s: attention dropout %s -> 0 (the "
                            "kernel keeps no probabilities to drop)", kernel,
                            encoder.attention_probs_dropout_prob)  # fmt: skip
            encoder = encoder.replace(attention_probs_dropout_prob=0.0)
        encoder = encoder.replace(attention_implementation=kernel)
    return encoder
