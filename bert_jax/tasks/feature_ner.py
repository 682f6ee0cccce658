"""The paper's feature-based NER (Table 7): frozen BERT features -> a trained 2-layer BiLSTM.

Features are the concatenation of the last four hidden layers of the frozen encoder (the best
row of Table 7, 96.1 dev F1 with BERT-base), computed once per window and kept on the host in
float16 (N x L x 4H). The tagger is a randomly initialised two-layer bidirectional LSTM
(`lstm_size` units per direction; the paper uses 768) and a linear layer over the tags, trained
with the same shared loop as fine-tuning (`bert_jax.train.loop`) on the same first-sub-token
loss; only the BiLSTM and the output layer are trained.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.arch.bert.bilstm import BiLSTMTagger
from bert_jax.arch.bert.model import BertModel
from bert_jax.config import BertConfig
from bert_jax.tasks.arrays import eval_batches
from bert_jax.tasks.train_tasks import cross_entropy
from bert_jax.train.task import Batch, Metrics


def last_four_layers(
    bert: BertConfig, params: dict, arrays: dict[str, np.ndarray], batch_size: int = 32
) -> np.ndarray:
    """Concat of the last four encoder layers for every window, float16 N x L x 4H."""
    model = BertModel(bert, add_pooling_layer=False)

    @jax.jit
    def extract(ids, mask, seg):
        out = model.apply(
            {"params": params}, ids, mask, seg, deterministic=True, output_hidden_states=True
        )
        return jnp.concatenate(out.hidden_states[-4:], axis=-1).astype(jnp.float16)

    keys = ("input_ids", "input_mask", "segment_ids")
    chunks = []
    for batch, real in eval_batches({k: arrays[k] for k in keys}, batch_size):
        chunks.append(np.asarray(extract(*(batch[k] for k in keys)))[:real])
    return np.concatenate(chunks)


@dataclasses.dataclass
class FeatureTaggingTask:
    """A `bert_jax.train.task.Task` over precomputed features."""

    feature_size: int
    num_labels: int
    global_batch_size: int
    max_seq_length: int
    lstm_size: int = 768

    def __post_init__(self) -> None:
        self.model = BiLSTMTagger(self.num_labels, self.lstm_size)

    features_input = "features_BxLxF"  # the tagger's argument that takes `features`

    def _features_shape(self) -> tuple[int, ...]:
        return (self.global_batch_size, self.max_seq_length, self.feature_size)

    def init_inputs(self) -> dict[str, jax.ShapeDtypeStruct]:
        b, seq_len = self.global_batch_size, self.max_seq_length
        return {
            "features": jax.ShapeDtypeStruct(self._features_shape(), jnp.float16),
            "input_mask": jax.ShapeDtypeStruct((b, seq_len), jnp.int32),
            "labels": jax.ShapeDtypeStruct((b, seq_len), jnp.int32),
            "label_weights": jax.ShapeDtypeStruct((b, seq_len), jnp.float32),
        }

    def model_inputs(self, batch: Batch) -> dict[str, jax.Array]:
        return {self.features_input: batch["features"], "input_mask_BxL": batch["input_mask"]}

    def predict(self, params: Any, batch: Batch) -> jax.Array:
        return self.model.apply({"params": params}, **self.model_inputs(batch))

    def loss_fn(
        self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Metrics]:
        logits_BxLxC = self.model.apply(
            {"params": params},
            **self.model_inputs(batch),
            deterministic=deterministic,
            rngs=None if deterministic else {"dropout": rng},
        )
        w_BxL = batch["label_weights"]
        denom = jnp.sum(w_BxL) + 1e-5
        loss = jnp.sum(cross_entropy(logits_BxLxC, batch["labels"]) * w_BxL) / denom
        return loss, {"loss": loss}

    def flops_per_step(self, global_batch_size: int) -> float:
        f, h = self.feature_size, self.lstm_size
        per_tok = 2 * 2 * 4 * h * (f + h) + 2 * 2 * 4 * h * (2 * h + h)  # 2 layers x 2 dirs
        return 3.0 * global_batch_size * self.max_seq_length * per_tok


def prepare(
    job: Any, bert: BertConfig, bert_params: dict, batch: int, max_seq_length: int, lstm_size: int
):
    """The BiLSTM task and its training arrays; adds `features` to the job's dev splits."""
    feats = last_four_layers(bert, bert_params, job.train)
    train = {k: job.train[k] for k in ("input_mask", "labels", "label_weights")}
    train["features"] = feats
    for split in job.evals:
        if "features" not in split.arrays:
            split.arrays["features"] = last_four_layers(bert, bert_params, split.arrays)
    task = FeatureTaggingTask(feats.shape[-1], job.num_labels, batch, max_seq_length, lstm_size)
    return task, train
