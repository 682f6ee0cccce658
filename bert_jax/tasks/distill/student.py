"""The student's training Task: a fine-tuning Task (`bert_jax.tasks.train_tasks`) whose loss is the
distillation loss against the teacher's outputs plus `alpha` x its own hard-label loss on the rows
that have a label (`has_label`).

    task = DistillTask(base, loss="kl", temperature=2.0, alpha=0.0)          # cached outputs
    task = DistillTask(base, loss="kl", temperature=2.0, alpha=0.0, teacher=t)   # online

Cached: the batch carries `teacher_logits` (`bert_jax.tasks.distill.cache`). Online: the
frozen teacher runs forward inside the same jitted, sharded step; its weights are the `teacher`
subtree of the params (sharded by the same rules, no update, no optimizer state), the student's
stay where the plain fine-tuning model has them, so checkpoints, `convert` and evaluation see
the usual model.
Per family: classification and regression compare the [CLS] head's outputs per example, tagging
per token weighted by `label_weights` (a word's first piece), span QA the start and the end
distributions over the window, averaged.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.arch import registry
from bert_jax.errors import BertJaxError
from bert_jax.tasks import train_tasks
from bert_jax.tasks.distill import losses
from bert_jax.tasks.distill.teacher import Teacher
from bert_jax.train.task import Batch, Metrics


class StudentWithTeacher(nn.Module):
    """Init-only view of both models: the student's params at the top level (its own scope), the
    teacher's under `teacher`."""

    student: nn.Module
    teacher: nn.Module

    def setup(self) -> None:
        nn.share_scope(self, self.student)

    def __call__(self, deterministic: bool = True, **inputs):
        return self.student(**inputs, deterministic=deterministic), self.teacher(
            **inputs, deterministic=True
        )


@dataclasses.dataclass
class DistillTask:
    base: Any  # the student's fine-tuning Task
    loss: str = "kl"
    temperature: float = 1.0
    alpha: float = 0.0
    teacher: Teacher | None = None

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise BertJaxError(f"config distill.temperature={self.temperature}: must be > 0")
        if not self.alpha >= 0:
            raise BertJaxError(f"config distill.alpha={self.alpha}: must be >= 0")
        self.kind = self._kind()
        losses.check_loss(self.loss, self.kind == "regression")
        self.model = self.base.model
        if self.teacher is not None:
            b, L = self.base.global_batch_size, self.base.max_seq_length
            self.teacher_task = self.teacher.task(L, b)
            self.model = StudentWithTeacher(
                self.base.model.clone(), self.teacher_task.model.clone()
            )
            self.frozen_paths = (("teacher",),)

    def _kind(self) -> str:
        base = self.base
        if isinstance(base, train_tasks.ClassificationTask):
            if base.num_choices:
                raise BertJaxError("distillation: multiple choice (swag) is not covered")
            return "regression" if base.is_regression else "classification"
        if isinstance(base, train_tasks.TaggingTask):
            return "tagging"
        return "span"

    @property
    def bert_config(self):
        return self.base.bert_config  # the student's

    # ---- the Task interface ----------------------------------------------------------------
    def init_inputs(self) -> dict[str, jax.ShapeDtypeStruct]:
        shapes = dict(self.base.init_inputs())
        b, L = self.base.global_batch_size, self.base.max_seq_length
        shapes["has_label"] = jax.ShapeDtypeStruct((b,), jnp.int32)
        if self.teacher is None:
            c = self.base.num_labels if self.kind != "span" else 0
            shape = {"tagging": (b, L, c), "span": (b, 2, L)}.get(self.kind, (b, c))
            shapes["teacher_logits"] = jax.ShapeDtypeStruct(shape, jnp.float32)
        return shapes

    def model_inputs(self, batch: Batch) -> dict[str, jax.Array]:
        return self.base.model_inputs(batch)

    @staticmethod
    def student_params(params: Any) -> Any:
        return {k: v for k, v in params.items() if k != "teacher"}

    def predict(self, params: Any, batch: Batch):
        return self.base.predict(self.student_params(params), batch)

    def _teacher_outputs(self, params: Any, batch: Batch) -> jax.Array:
        if self.teacher is None:
            return batch["teacher_logits"]
        out = self.teacher_task.predict(params["teacher"], batch)
        out = jnp.stack(out, 1) if isinstance(out, tuple) else out
        return jax.lax.stop_gradient(out)

    def loss_fn(
        self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Metrics]:
        student = self.base.apply(self.student_params(params), batch, rng, deterministic)
        teacher = self._teacher_outputs(params, batch)
        labelled_B = batch["has_label"].astype(jnp.float32)
        ones_B = jnp.ones_like(labelled_B)
        per = lambda s, t: losses.per_row(s, t, self.loss, self.temperature)
        metrics: Metrics = {}
        if self.kind in ("classification", "regression"):
            soft = losses.weighted_mean(per(student, teacher), ones_B)
            if self.kind == "regression":
                err_B = jnp.square(student[:, 0] - batch["labels"].astype(jnp.float32))
            else:
                err_B = train_tasks.cross_entropy(student, batch["labels"])
                agree = jnp.argmax(student, -1) == jnp.argmax(teacher, -1)
                metrics["teacher_agreement"] = jnp.mean(agree.astype(jnp.float32))
            hard = losses.weighted_mean(err_B, labelled_B)
        elif self.kind == "tagging":
            w_BxL = batch["label_weights"].astype(jnp.float32)
            soft = losses.weighted_mean(per(student, teacher), w_BxL)
            err_BxL = train_tasks.cross_entropy(student, batch["labels"])
            hard = losses.weighted_mean(err_BxL, w_BxL * labelled_B[:, None])
        else:
            s_Bx2xL = jnp.stack(student, 1)
            soft = losses.weighted_mean(jnp.mean(per(s_Bx2xL, teacher), 1), ones_B)
            err_B = (
                train_tasks.cross_entropy(student[0], batch["start_positions"])
                + train_tasks.cross_entropy(student[1], batch["end_positions"])
            ) / 2
            hard = losses.weighted_mean(err_B, labelled_B)
        loss = soft + self.alpha * hard
        metrics.update(loss=loss, distill_loss=soft, hard_loss=hard)
        return loss, metrics

    def flops_per_step(self, global_batch_size: int) -> float:
        total = self.base.flops_per_step(global_batch_size)
        if self.teacher is not None:  # forward only: a third of forward + backward
            arch = registry.for_model_config(self.teacher.config)
            per_tok = arch.encoder_flops_per_token(self.teacher.config, self.base.max_seq_length)
            total += self.base.tokens_per_step(global_batch_size) * per_tok / 3
        return total

    def tokens_per_step(self, global_batch_size: int) -> int:
        return self.base.tokens_per_step(global_batch_size)
