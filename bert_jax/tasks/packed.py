"""Packed fine-tuning (`pack_examples=True`): GLUE classification/regression and CoNLL tagging on
rows holding several examples each (`bert_jax.input.packing`), the same run otherwise.

- The job's featurised splits are packed once after loading; training shuffles packed rows.
- `train_batch_size` keeps its meaning, examples per step: a step takes
  ceil(train_batch_size / examples per row) rows (rounded up to the batch devices), so
  train_steps, the schedule and the examples seen per epoch stay those of the padded run.
  `eval_batch_size` counts rows.
- Sentence heads give one row of logits per packed example (B x S x C); the loss and accuracy
  average over the examples present, so a packed batch's loss equals the padded batch's on the
  same examples. Tagging's loss is already a weighted token average. Predictions are mapped back
  to example order before the job scores them: metrics and prediction files are unchanged.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

from bert_jax.errors import BertJaxError
from bert_jax.input import packing
from bert_jax.tasks.jobs import Split
from bert_jax.tasks.train_tasks import ClassificationTask, TaggingTask, cross_entropy
from bert_jax.train.task import Batch, Metrics

# Examples a row may hold: GLUE sentences at 128 tokens rarely fit more (SST-2 averages ~13
# tokens: 9 per row); a sentence head's output is S slots wide either way.
MAX_SEQUENCES = 16
# What each task family packs as tokens (R x L) rather than per example (R x S).
TOKEN_KEYS = {
    "glue": packing.INPUT_KEYS,
    "ner": (*packing.INPUT_KEYS, "labels", "label_weights"),
}


def _packed_shapes(task: Any, shapes: dict[str, jax.ShapeDtypeStruct]) -> dict:
    b, seq_len = task.global_batch_size, task.max_seq_length
    return shapes | {"pack_ids": jax.ShapeDtypeStruct((b, seq_len), jnp.int32)}


@dataclasses.dataclass
class PackedClassificationTask(ClassificationTask):
    max_sequences: int = dataclasses.field(default=MAX_SEQUENCES, kw_only=True)

    def __post_init__(self) -> None:
        if self.num_choices:
            raise BertJaxError("pack_examples: multiple choice is not packed")
        super().__post_init__()
        if not hasattr(self.model, "max_sequences"):  # e.g. the "+ BiLSTM" head
            raise BertJaxError(f"pack_examples: {type(self.model).__name__} reads no packed rows")
        self.model = self.model.clone(max_sequences=self.max_sequences)

    def _label_shapes(self) -> dict[str, jax.ShapeDtypeStruct]:
        b_s = (self.global_batch_size, self.max_sequences)
        dtype = jnp.float32 if self.is_regression else jnp.int32
        return {
            "labels": jax.ShapeDtypeStruct(b_s, dtype),
            "present": jax.ShapeDtypeStruct(b_s, jnp.bool_),
        }

    def init_inputs(self) -> dict[str, jax.ShapeDtypeStruct]:
        return _packed_shapes(self, super().init_inputs())

    def model_inputs(self, batch: Batch) -> dict[str, jax.Array]:
        return super().model_inputs(batch) | {"pack_BxL": batch["pack_ids"]}

    def loss_fn(
        self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Metrics]:
        logits_BxSxC = self.apply(params, batch, rng, deterministic)
        labels_BxS = batch["labels"]
        w_BxS = batch["present"].astype(jnp.float32)
        count = jnp.maximum(jnp.sum(w_BxS), 1.0)
        if self.is_regression:
            err_BxS = jnp.square(logits_BxSxC[..., 0] - labels_BxS.astype(jnp.float32))
            loss = jnp.sum(err_BxS * w_BxS) / count
            return loss, {"loss": loss}
        loss = jnp.sum(cross_entropy(logits_BxSxC, labels_BxS) * w_BxS) / count
        hit_BxS = (jnp.argmax(logits_BxSxC, -1) == labels_BxS).astype(jnp.float32)
        return loss, {"loss": loss, "accuracy": jnp.sum(hit_BxS * w_BxS) / count}


@dataclasses.dataclass
class PackedTaggingTask(TaggingTask):
    def init_inputs(self) -> dict[str, jax.ShapeDtypeStruct]:
        return _packed_shapes(self, super().init_inputs())

    def model_inputs(self, batch: Batch) -> dict[str, jax.Array]:
        return super().model_inputs(batch) | {"pack_BxL": batch["pack_ids"]}


PACKED_TASKS = {ClassificationTask: PackedClassificationTask, TaggingTask: PackedTaggingTask}


class PackedJob:
    """A GLUE or CoNLL job (`bert_jax.tasks.jobs`) whose splits reach the model packed."""

    def __init__(self, job: Any, cfg: Any, padding_side: str = "right") -> None:
        family = cfg.task_family
        if family not in TOKEN_KEYS:
            raise BertJaxError(
                f"pack_examples: task_family {family!r} is not packed (use one of "
                f"{sorted(TOKEN_KEYS)})"
            )
        for key in ("bilstm_size", "feature_based"):
            if cfg.get(key):
                raise BertJaxError(f"pack_examples: not built with config {key}")
        if cfg.get("distill") and (cfg.distill.get("data") or cfg.distill.get("teacher")):
            raise BertJaxError("pack_examples: not built with config distill")
        if padding_side != "right":
            raise BertJaxError(
                f"pack_examples: needs right-padded rows (this model pads on the {padding_side})"
            )
        self.inner, self.cfg = job, cfg
        self.token_keys = TOKEN_KEYS[family]
        self.by_examples = family == "glue"  # one output row per example, else per token

    def __getattr__(self, name: str) -> Any:  # everything not about packing: the job's own
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _pack(self, split: Split) -> Split:
        arrays, where = packing.pack_arrays(split.arrays, MAX_SEQUENCES, self.token_keys)
        return Split(split.name, arrays, (split, where))

    def load(self, tokenizer: Any) -> None:
        self.inner.load(tokenizer)
        self.num_train_examples = self.inner.num_train_examples
        self.train, self.train_packing = packing.pack_arrays(
            self.inner.train, MAX_SEQUENCES, self.token_keys
        )
        self.evals = [self._pack(s) for s in self.inner.evals]
        self.tests = [self._pack(s) for s in self.inner.tests]
        self.stats = {**getattr(self.inner, "stats", {}), "packing": self.train_packing.stats()}

    def rows_per_step(self, batch: int, mesh: Any) -> int:
        """Packed rows that hold about `batch` examples, a multiple of the batch devices."""
        per_row = self.train_packing.stats()["examples_per_row"]
        devices = mesh.shape["data"] * mesh.shape["fsdp"]
        return math.ceil(math.ceil(batch / per_row) / devices) * devices

    def train_task(self, bert: Any, rows: int) -> Any:
        task = self.inner.train_task(bert, rows)
        fields = {f.name: getattr(task, f.name) for f in dataclasses.fields(task)}
        return PACKED_TASKS[type(task)](**fields)

    def _unpack(self, split: Split, outputs: Any) -> tuple[Split, Any]:
        original, where = split.meta
        unpack = packing.unpack_sequences if self.by_examples else packing.unpack_tokens
        return original, jax.tree.map(lambda x: unpack(x, where), outputs)

    def score(self, split: Split, outputs: Any, workdir: str) -> dict[str, float]:
        return self.inner.score(*self._unpack(split, outputs), workdir)

    def write_test(self, split: Split, outputs: Any, workdir: str) -> None:
        self.inner.write_test(*self._unpack(split, outputs), workdir)
