"""ELMo features for CoNLL-layout tagging: word windows over `bert_jax.tasks.elmo_lm`'s word
vocabulary, and the scalar mix + BiLSTM tagger (`ElmoTagger`) as a `Task` of the shared loop.

A CoNLL word ("Hello," or "don't") may be several ELMo words (`elmo_lm.words` splits off
punctuation); its label sits on its first ELMo word, as `bert_jax.tasks.ner` puts it on the first
WordPiece, so `ner.word_predictions` and `ner.entity_f1` score both the same way. Sentences longer
than the window are split at word boundaries.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.model.elmo import ElmoTagger
from bert_jax.tasks import elmo_lm, ner
from bert_jax.tasks.train_tasks import cross_entropy
from bert_jax.train.task import Batch, Metrics


def featurize(
    sentences: list[ner.Sentence], vocab: list[str], length: int
) -> tuple[dict[str, np.ndarray], list[ner.Window]]:
    """{"input_ids", "input_mask", "labels", "label_weights"} [N, length] and the windows."""
    index = {w: i for i, w in enumerate(vocab)}
    rows: list[tuple[list[int], list[int], list[int]]] = []
    windows: list[ner.Window] = []
    for si, sent in enumerate(sentences):
        pieces = [[index.get(w, elmo_lm.UNK) for w in elmo_lm.words(word)] or [elmo_lm.UNK]
                  for word in sent.words]  # fmt: skip
        start = 0
        while start < len(sent.words):
            ids, starts, labels, end = [], [], [], start
            while end < len(sent.words) and (not ids or len(ids) + len(pieces[end]) <= length):
                starts.append(len(ids))
                labels.append(ner.LABELS.index(sent.tags[end]))
                ids += pieces[end][: length - len(ids)]
                end += 1
            rows.append((ids, starts, labels))
            windows.append(ner.Window(si, start, end - start, tuple(starts)))
            start = end
    shape = (len(rows), length)
    out = {k: np.zeros(shape, np.int32) for k in ("input_ids", "input_mask", "labels")}
    out["label_weights"] = np.zeros(shape, np.float32)
    for r, (ids, starts, labels) in enumerate(rows):
        out["input_ids"][r, : len(ids)] = ids
        out["input_mask"][r, : len(ids)] = 1
        out["labels"][r, starts] = labels
        out["label_weights"][r, starts] = 1.0
    return out, windows


@dataclasses.dataclass
class ElmoTaggingTask:
    """`ElmoTagger` over precomputed frozen layers `features` [B, N, L, F] (float16)."""

    num_layers: int  # ELMo layers incl. the embedding (num_layers + 1 of the biLM)
    feature_size: int
    num_labels: int
    global_batch_size: int
    max_seq_length: int
    lstm_size: int = 768

    def __post_init__(self) -> None:
        self.model = ElmoTagger(self.num_labels, self.lstm_size)

    def init_inputs(self) -> dict[str, jax.ShapeDtypeStruct]:
        b, n, seq, f = (self.global_batch_size, self.num_layers, self.max_seq_length,
                        self.feature_size)  # fmt: skip
        return {
            "features": jax.ShapeDtypeStruct((b, n, seq, f), jnp.float16),
            "input_mask": jax.ShapeDtypeStruct((b, seq), jnp.int32),
            "labels": jax.ShapeDtypeStruct((b, seq), jnp.int32),
            "label_weights": jax.ShapeDtypeStruct((b, seq), jnp.float32),
        }

    def model_inputs(self, batch: Batch) -> dict[str, jax.Array]:
        return {"layers_BxNxLxF": batch["features"], "input_mask_BxL": batch["input_mask"]}

    def predict(self, params: Any, batch: Batch) -> jax.Array:
        return self.model.apply({"params": params}, **self.model_inputs(batch))

    def loss_fn(
        self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Metrics]:
        logits_BxLxC = self.model.apply(
            {"params": params}, **self.model_inputs(batch), deterministic=deterministic,
            rngs=None if deterministic else {"dropout": rng},
        )  # fmt: skip
        w_BxL = batch["label_weights"]
        denom = jnp.sum(w_BxL) + 1e-5
        loss = jnp.sum(cross_entropy(logits_BxLxC, batch["labels"]) * w_BxL) / denom
        return loss, {"loss": loss}

    def flops_per_step(self, global_batch_size: int) -> float:
        f, h = self.feature_size, self.lstm_size
        per_tok = 2 * 2 * 4 * h * (f + h) + 2 * 2 * 4 * h * (2 * h + h)  # as FeatureTaggingTask
        return 3.0 * global_batch_size * self.max_seq_length * per_tok
