"""The fine-tuning `bert_jax.train.task.Task`s: model head, its inputs, its loss, its predictions.

- `ClassificationTask`: pooled [CLS] -> classes; cross-entropy, or MSE when num_labels == 1
  (STS-B). Also SWAG/multiple choice with `num_choices` > 0 (inputs B x C x L, CE over choices).
- `TaggingTask`: per-token classes; cross-entropy weighted by `label_weights` (1 on the first
  sub-token of each word, 0 elsewhere), normalised by the weight sum.
- `SpanTask`: start/end logits over all tokens; (CE(start) + CE(end)) / 2, as run_squad.py.
Every task also has `predict(params, batch)` -> the head's logits (deterministic), which the
trainer jits as `predict_step` for evaluation. The heads are the architecture's
(`bert_jax.arch.registry`, from the config's type): given an `XLNetConfig`, XLNet's heads of the
same kind (inputs in XLNet's layout, see `bert_jax.arch.xlnet.layout`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import optax

from bert_jax.arch import registry
from bert_jax.config import BertConfig
from bert_jax.train.task import Batch, Metrics

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


def cross_entropy(logits_BxC: jax.Array, labels_B: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits_BxC, labels_B)


@dataclasses.dataclass
class _Base:
    bert_config: BertConfig
    global_batch_size: int
    max_seq_length: int
    # > 0: a randomly initialised BiLSTM of this size between the encoder and the output layer
    # (the paper's "+ BiLSTM" arm); the output layer then reads the BiLSTM's states.
    bilstm_size: int = dataclasses.field(default=0, kw_only=True)

    def _seq_shape(self) -> tuple[int, ...]:
        return (self.global_batch_size, self.max_seq_length)

    def _label_shapes(self) -> dict[str, jax.ShapeDtypeStruct]:
        raise NotImplementedError

    def init_inputs(self) -> dict[str, jax.ShapeDtypeStruct]:
        shapes = {k: jax.ShapeDtypeStruct(self._seq_shape(), jnp.int32) for k in INPUT_KEYS}
        return shapes | self._label_shapes()

    def model_inputs(self, batch: Batch) -> dict[str, jax.Array]:
        suffix = "BxCxL" if len(self._seq_shape()) == 3 else "BxL"
        return {f"{k}_{suffix}": batch[k] for k in INPUT_KEYS}

    def apply(self, params: Any, batch: Batch, rng: jax.Array | None, deterministic: bool):
        return self.model.apply(
            {"params": params},
            **self.model_inputs(batch),
            deterministic=deterministic,
            rngs=None if deterministic else {"dropout": rng},
        )

    def predict(self, params: Any, batch: Batch):
        return self.apply(params, batch, None, True)

    @property
    def family(self) -> registry.Architecture:
        """The architecture whose heads this task builds (from the config's type)."""
        return registry.for_model_config(self.bert_config)

    def flops_per_step(self, global_batch_size: int) -> float:
        per_tok = self.family.encoder_flops_per_token(self.bert_config, self.max_seq_length)
        return self.tokens_per_step(global_batch_size) * per_tok

    def tokens_per_step(self, global_batch_size: int) -> int:
        seqs = global_batch_size * (self._seq_shape()[1] if len(self._seq_shape()) == 3 else 1)
        return seqs * self.max_seq_length


@dataclasses.dataclass
class ClassificationTask(_Base):
    num_labels: int = 2
    num_choices: int = 0  # > 0: multiple choice (SWAG), inputs B x C x L

    def __post_init__(self) -> None:
        if self.num_choices:
            self.model = self.family.multiple_choice(self.bert_config, self.bilstm_size)
        else:
            self.model = self.family.classifier(self.bert_config, self.num_labels, self.bilstm_size)

    def _seq_shape(self) -> tuple[int, ...]:
        if self.num_choices:
            return (self.global_batch_size, self.num_choices, self.max_seq_length)
        return (self.global_batch_size, self.max_seq_length)

    @property
    def is_regression(self) -> bool:
        return not self.num_choices and self.num_labels == 1

    def _label_shapes(self) -> dict[str, jax.ShapeDtypeStruct]:
        dtype = jnp.float32 if self.is_regression else jnp.int32
        return {"labels": jax.ShapeDtypeStruct((self.global_batch_size,), dtype)}

    def loss_fn(
        self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Metrics]:
        logits_BxC = self.apply(params, batch, rng, deterministic)
        labels_B = batch["labels"]
        if self.is_regression:
            loss = jnp.mean(jnp.square(logits_BxC[:, 0] - labels_B.astype(jnp.float32)))
            return loss, {"loss": loss}
        loss = jnp.mean(cross_entropy(logits_BxC, labels_B))
        acc = jnp.mean((jnp.argmax(logits_BxC, -1) == labels_B).astype(jnp.float32))
        return loss, {"loss": loss, "accuracy": acc}


@dataclasses.dataclass
class TaggingTask(_Base):
    num_labels: int = 9

    def __post_init__(self) -> None:
        self.model = self.family.tagger(self.bert_config, self.num_labels, self.bilstm_size)

    def _label_shapes(self) -> dict[str, jax.ShapeDtypeStruct]:
        return {
            "labels": jax.ShapeDtypeStruct(self._seq_shape(), jnp.int32),
            "label_weights": jax.ShapeDtypeStruct(self._seq_shape(), jnp.float32),
        }

    def loss_fn(
        self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Metrics]:
        logits_BxLxC = self.apply(params, batch, rng, deterministic)
        w_BxL = batch["label_weights"].astype(jnp.float32)
        denom = jnp.sum(w_BxL) + 1e-5
        loss = jnp.sum(cross_entropy(logits_BxLxC, batch["labels"]) * w_BxL) / denom
        hit_BxL = (jnp.argmax(logits_BxLxC, -1) == batch["labels"]).astype(jnp.float32)
        return loss, {"loss": loss, "token_accuracy": jnp.sum(hit_BxL * w_BxL) / denom}


@dataclasses.dataclass
class SpanTask(_Base):
    def __post_init__(self) -> None:
        self.model = self.family.span_model(self.bert_config, self.bilstm_size)

    def _label_shapes(self) -> dict[str, jax.ShapeDtypeStruct]:
        b = self.global_batch_size
        return {
            "start_positions": jax.ShapeDtypeStruct((b,), jnp.int32),
            "end_positions": jax.ShapeDtypeStruct((b,), jnp.int32),
        }

    def loss_fn(
        self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Metrics]:
        start_BxL, end_BxL = self.apply(params, batch, rng, deterministic)
        loss_s = jnp.mean(cross_entropy(start_BxL, batch["start_positions"]))
        loss_e = jnp.mean(cross_entropy(end_BxL, batch["end_positions"]))
        loss = (loss_s + loss_e) / 2
        return loss, {"loss": loss, "start_loss": loss_s, "end_loss": loss_e}

