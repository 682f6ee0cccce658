"""ELMo's two language models as a `Task` of the shared loop, on word windows of a corpus.

Words are lowercased runs of letters, of digits, or single other characters; the vocabulary is
the `vocab_size - 2` most frequent training words plus <pad> (0) and <unk> (1). Each document's
word stream is cut into windows of `length` words (the last one padded). The loss is the mean of
the forward LM's and the backward LM's cross-entropy over the full vocabulary (ELMo trains them
jointly: the sum of both log likelihoods); perplexity is exp of a direction's mean loss.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.arch.elmo.model import ElmoBiLM, ElmoConfig
from bert_jax.tasks.arrays import eval_batches
from bert_jax.tasks.train_tasks import cross_entropy
from bert_jax.train.task import Batch, Metrics

PAD, UNK = 0, 1
_WORD = re.compile(r"[a-z]+|[0-9]+|[^\sa-z0-9]")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def build_vocab(documents: Iterable[list[str]], size: int) -> list[str]:
    counts = collections.Counter(w for doc in documents for sent in doc for w in words(sent))
    return ["<pad>", "<unk>"] + [w for w, _ in counts.most_common(size - 2)]


def windows(documents: Iterable[list[str]], vocab: list[str], length: int) -> dict[str, np.ndarray]:
    """{"input_ids", "input_mask"} [N, length]: each document's words, cut into windows."""
    index = {w: i for i, w in enumerate(vocab)}
    rows = []
    for doc in documents:
        ids = [index.get(w, UNK) for sent in doc for w in words(sent)]
        rows += [ids[i : i + length] for i in range(0, len(ids), length) if len(ids[i:]) > 1]
    out = np.zeros((len(rows), length), np.int32)
    for r, ids in enumerate(rows):
        out[r, : len(ids)] = ids
    return {"input_ids": out, "input_mask": (out != PAD).astype(np.int32)}


def unigram_perplexity(train: dict, held_out: dict, vocab_size: int) -> float:
    """exp(mean -log p(w)) of the held-out targets under training word frequencies (add-one)."""
    counts = np.bincount(train["input_ids"][train["input_mask"] > 0], minlength=vocab_size)
    logp = np.log((counts + 1.0) / (counts.sum() + vocab_size))
    targets = held_out["input_ids"][:, 1:][held_out["input_mask"][:, 1:] > 0]
    return float(math.exp(-logp[targets].mean()))


def _direction_terms(logits_BxLxV, ids_BxL, mask_BxL, forward: bool):
    """(sum of cross-entropies, number of targets): forward predicts t+1 at t, backward t-1."""
    if forward:
        logits, targets, w = logits_BxLxV[:, :-1], ids_BxL[:, 1:], mask_BxL[:, 1:]
    else:
        logits, targets, w = logits_BxLxV[:, 1:], ids_BxL[:, :-1], mask_BxL[:, 1:]
    w = w.astype(jnp.float32)
    return jnp.sum(cross_entropy(logits, targets) * w), jnp.sum(w)


@dataclasses.dataclass
class ElmoLMTask:
    config: ElmoConfig
    global_batch_size: int
    length: int
    eval_arrays: dict[str, np.ndarray] | None = None

    def __post_init__(self) -> None:
        self.model = ElmoBiLM(self.config)

    def init_inputs(self) -> dict[str, jax.ShapeDtypeStruct]:
        shape = (self.global_batch_size, self.length)
        return {k: jax.ShapeDtypeStruct(shape, jnp.int32) for k in ("input_ids", "input_mask")}

    def model_inputs(self, batch: Batch) -> dict[str, jax.Array]:
        return {"ids_BxL": batch["input_ids"], "mask_BxL": batch["input_mask"]}

    def loss_fn(
        self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Metrics]:
        fwd, bwd, _ = self.model.apply(
            {"params": params}, **self.model_inputs(batch), deterministic=deterministic,
            rngs=None if deterministic else {"dropout": rng},
        )  # fmt: skip
        ids, mask = batch["input_ids"], batch["input_mask"]
        f_sum, n = _direction_terms(fwd, ids, mask, True)
        b_sum, _ = _direction_terms(bwd, ids, mask, False)
        n = jnp.maximum(n, 1.0)
        metrics = {"forward_loss": f_sum / n, "backward_loss": b_sum / n, "targets": n}
        return 0.5 * (f_sum + b_sum) / n, metrics

    def tokens_per_step(self, global_batch_size: int) -> int:
        return global_batch_size * self.length

    def flops_per_step(self, global_batch_size: int) -> float:
        c = self.config
        lstm = c.num_layers * 2 * (2 * 4 * c.hidden * (2 * c.dim) + 2 * c.hidden * c.dim)
        softmax = 2 * 2 * c.dim * c.vocab_size
        return 3.0 * global_batch_size * self.length * (lstm + softmax)

    def evaluate(self, trainer: Any, params: Any) -> dict[str, float]:
        """Held-out perplexity of each direction (token-weighted over all eval windows)."""
        if self.eval_arrays is None:
            return {}
        sums = {"forward_loss": 0.0, "backward_loss": 0.0}
        total = 0.0
        for batch, _ in eval_batches(self.eval_arrays, self.global_batch_size):
            # Padding rows are all <pad>: their targets have zero weight.
            m = jax.device_get(trainer.eval_step(params, trainer.place_batch(batch)))
            for k in sums:
                sums[k] += float(m[k]) * float(m["targets"])
            total += float(m["targets"])
        out = {k: v / total for k, v in sums.items()}
        out.update({k.replace("loss", "perplexity"): math.exp(v) for k, v in out.items()})
        return out


def layer_features(
    config: ElmoConfig, params: Any, arrays: dict[str, np.ndarray], batch_size: int = 32
) -> np.ndarray:
    """Frozen ELMo layers of every window, [N, num_layers + 1, L, 2 dim] float16 (the scalar mix
    is trained on top, `bert_jax.arch.elmo.model.ElmoTagger`)."""
    model = ElmoBiLM(config)

    @jax.jit
    def extract(ids, mask):
        layers_NxBxLxF = model.apply({"params": params}, ids, mask)[2]
        return jnp.moveaxis(layers_NxBxLxF, 0, 1).astype(jnp.float16)

    chunks = []
    keys = ("input_ids", "input_mask")
    for batch, real in eval_batches({k: arrays[k] for k in keys}, batch_size):
        chunks.append(np.asarray(extract(batch["input_ids"], batch["input_mask"]))[:real])
    return np.concatenate(chunks)
