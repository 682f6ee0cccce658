"""Encoder-decoder training as a `Task` (bert_jax.train.task) of the one trainer and loop:
teacher-forced cross-entropy on `targets` (padding id 0 ignored), label smoothing from the
model config (the Transformer's 0.1), token accuracy; evaluation over held-out batches.

Batch: `inputs` [B, S] and `targets` [B, T] (int32, 0 = padding, targets end with EOS). The
decoder reads the targets shifted right behind the decoder start token (T5's `_shift_right`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bert_jax.arch.seq2seq import EncoderDecoder, Seq2SeqConfig
from bert_jax.objectives.losses import DENOMINATORS
from bert_jax.train.task import Batch, Metrics


def shift_right(targets_BxT: jax.Array, start_id: int) -> jax.Array:
    start = jnp.full_like(targets_BxT[:, :1], start_id)
    return jnp.concatenate([start, targets_BxT[:, :-1]], axis=1)


def token_losses(logits_BxTxV, targets_BxT, label_smoothing: float):
    """(per-token training loss, per-token NLL, per-token correct), all float32 BxT."""
    logits_BxTxV = logits_BxTxV.astype(jnp.float32)
    v = logits_BxTxV.shape[-1]
    onehot = jax.nn.one_hot(targets_BxT, v, dtype=jnp.float32)
    nll = optax.softmax_cross_entropy(logits_BxTxV, onehot)
    if label_smoothing > 0:
        smooth = onehot * (1 - label_smoothing) + label_smoothing / v
        loss = optax.softmax_cross_entropy(logits_BxTxV, smooth)
    else:
        loss = nll
    correct = (jnp.argmax(logits_BxTxV, -1) == targets_BxT).astype(jnp.float32)
    return loss, nll, correct


@dataclasses.dataclass
class Seq2SeqTask:
    config: Seq2SeqConfig
    global_batch_size: int
    inputs_length: int
    targets_length: int
    train_data: Any = None  # a resumable iterator of batches (bert_jax.input.seq2seq)
    eval_data: Iterable[dict] | None = None  # held-out batches
    # Target ids that are not content (sentinels, EOS) are excluded from `content_accuracy`.
    first_sentinel_id: int | None = None
    model: Any = None  # default EncoderDecoder(config); the LSTM baseline passes its own

    def __post_init__(self) -> None:
        if self.model is None:
            self.model = EncoderDecoder(self.config)

    def init_inputs(self) -> dict[str, jax.ShapeDtypeStruct]:
        b = self.global_batch_size
        return {
            "inputs": jax.ShapeDtypeStruct((b, self.inputs_length), jnp.int32),
            "targets": jax.ShapeDtypeStruct((b, self.targets_length), jnp.int32),
        }

    def model_inputs(self, batch: Batch) -> dict[str, jax.Array]:
        return {
            "encoder_input_ids_BxS": batch["inputs"],
            "encoder_mask_BxS": (batch["inputs"] != self.config.pad_token_id).astype(jnp.int32),
            "decoder_input_ids_BxT": shift_right(batch["targets"],
                                                 self.config.decoder_start_token_id),
        }  # fmt: skip

    def _weights(self, batch: Batch) -> jax.Array:
        return (batch["targets"] != self.config.pad_token_id).astype(jnp.float32)

    def loss_fn(self, params, batch: Batch, rng, deterministic: bool) -> tuple[jax.Array, Metrics]:
        out = self.model.apply(
            {"params": params}, **self.model_inputs(batch), deterministic=deterministic,
            rngs=None if deterministic else {"dropout": rng},
        )  # fmt: skip
        loss, nll, correct = token_losses(out.logits_BxTxV, batch["targets"],
                                          self.config.label_smoothing)  # fmt: skip
        w = self._weights(batch)
        given = batch.get(DENOMINATORS, {}).get("targets")
        denom = given if given is not None else jnp.sum(w) + 1e-5
        metrics = {
            "target_nll": jnp.sum(nll * w) / denom,
            "target_accuracy": jnp.sum(correct * w) / denom,
        }
        if self.first_sentinel_id is not None:
            content = w * (batch["targets"] < self.first_sentinel_id) * (batch["targets"] != 1)
            metrics["content_accuracy"] = jnp.sum(correct * content) / (jnp.sum(content) + 1e-5)
        return jnp.sum(loss * w) / denom, metrics

    def loss_denominators(self, batch: Batch) -> dict[str, jax.Array]:
        return {"targets": jnp.sum(self._weights(batch)) + 1e-5}

    def predict(self, params, batch: Batch) -> jax.Array:
        return self.model.apply({"params": params}, **self.model_inputs(batch)).logits_BxTxV

    def flops_per_step(self, global_batch_size: int) -> float:
        """Matmul weight FLOPs (fwd + bwd = 6 per MAC) of the model's config's count: the
        Transformer's encoder, decoder and LM head, or the LSTM baseline's gates, attention and
        output."""
        per_seq = self.config.weight_flops_per_sequence(self.inputs_length, self.targets_length)
        return 6.0 * per_seq * global_batch_size

    def saved_elements(self, global_batch_size: int) -> float | None:
        count = getattr(self.config, "saved_elements_per_sequence", None)  # none for the RNN
        if count is None:
            return None
        return count(self.inputs_length, self.targets_length) * global_batch_size

    def tokens_per_step(self, global_batch_size: int) -> int:
        return global_batch_size * (self.inputs_length + self.targets_length)

    def train_input(self, trainer: Any):
        return self.train_data

    def evaluate(self, trainer: Any, params: Any) -> dict[str, float]:
        """Token-weighted means over the held-out batches."""
        if self.eval_data is None:
            return {}
        sums: dict[str, float] = {}
        weights: dict[str, float] = {}
        for batch in self.eval_data:
            m = jax.device_get(trainer.eval_step(params, trainer.place_batch(batch)))
            t = np.asarray(batch["targets"])
            w_all = float(np.sum(t != self.config.pad_token_id))
            w_content = w_all
            if self.first_sentinel_id is not None:
                w_content = float(np.sum((t != 0) & (t != 1) & (t < self.first_sentinel_id)))
            for k, v in m.items():
                w = w_content if k == "content_accuracy" else w_all
                sums[k] = sums.get(k, 0.0) + float(v) * w
                weights[k] = weights.get(k, 0.0) + w
        return {k: sums[k] / max(weights[k], 1e-9) for k in sums}
