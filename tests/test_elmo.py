"""ELMo on real English (the corpus snapshot), through the shared loop: both directional LMs reach
a held-out perplexity well below the unigram model's, and the scalar mix of the frozen layers
feeds the feature-based BiLSTM tagger, which learns a held-out word-level tagging task."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from bert_jax.arch.elmo import lm as elmo_lm
from bert_jax.arch.elmo.model import ElmoConfig, ElmoTagger, ScalarMix
from bert_jax.corpus import snapshot
from bert_jax.tasks.arrays import TrainBatches
from bert_jax.train.config import pretrain_config
from bert_jax.train.loop import train

LENGTH, VOCAB = 32, 2000


def test_scalar_mix_is_gamma_times_softmax_weighted_sum():
    layers = np.random.RandomState(0).randn(3, 2, 4, 5).astype(np.float32)
    params = {"weights": np.array([0.5, -1.0, 2.0], np.float32), "gamma": np.float32(0.7)}
    out = ScalarMix().apply({"params": params}, layers)
    w = np.exp(params["weights"]) / np.exp(params["weights"]).sum()
    np.testing.assert_allclose(out, 0.7 * np.tensordot(w, layers, 1), rtol=1e-5)


@pytest.fixture(scope="module")
def corpus():
    docs = list(snapshot.iter_documents(max_documents=500))
    n_eval = len(docs) // 8
    vocab = elmo_lm.build_vocab(docs[:-n_eval], VOCAB)
    tr = elmo_lm.windows(docs[:-n_eval], vocab, LENGTH)
    ev = elmo_lm.windows(docs[-n_eval:], vocab, LENGTH)
    return vocab, tr, ev


def _config(steps: int, lr: float = 2e-3):
    c = pretrain_config("tiny")
    c.update(dict(learning_rate=lr, schedule="constant", warmup_steps=0, train_steps=steps,
                  log_every_steps=50, eval_every_steps=steps, checkpoint_every_steps=steps,
                  weight_decay=0.0))  # fmt: skip
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 1, 1
    return c


@pytest.fixture(scope="module")
def trained_lm(corpus, tmp_path_factory):
    vocab, tr, ev = corpus
    cfg = ElmoConfig(vocab_size=len(vocab), dim=64, hidden=128, dropout=0.0)
    task = elmo_lm.ElmoLMTask(cfg, 32, LENGTH, eval_arrays=ev)
    result = train(_config(150, lr=5e-3), task, str(tmp_path_factory.mktemp("elmo")),
                   batches=TrainBatches(tr, 32, seed=0))  # fmt: skip
    return cfg, result


@pytest.mark.slow
def test_both_lms_beat_unigram_perplexity(corpus, trained_lm):
    vocab, tr, ev = corpus
    _, result = trained_lm
    unigram = elmo_lm.unigram_perplexity(tr, ev, len(vocab))
    fwd = result.last_eval["eval_forward_perplexity"]
    bwd = result.last_eval["eval_backward_perplexity"]
    print(f"held-out perplexity forward {fwd:.1f}, backward {bwd:.1f}, unigram {unigram:.1f}")
    assert 100 < unigram < 2000
    assert fwd < 0.7 * unigram and bwd < 0.7 * unigram


@pytest.mark.slow
def test_scalar_mix_feeds_the_bilstm_tagger(corpus, trained_lm, tmp_path):
    """A word-level tagging task read off real text (is the word one of a closed list of
    function words), learned from frozen ELMo layers through the scalar mix and the BiLSTM
    tagger of Table 7. It shows the wiring trains end to end, not NER quality."""
    vocab, tr, ev = corpus
    cfg, result = trained_lm
    params = jax.device_get(result.state.params)
    function_words = {vocab.index(w) for w in ("the", "a", "of", "to", "is", "in", "and")}
    rows = {}
    for name, arrays in (("train", {k: v[:384] for k, v in tr.items()}), ("eval", ev)):
        feats = elmo_lm.layer_features(cfg, params, arrays)
        labels = np.isin(arrays["input_ids"], list(function_words)).astype(np.int32)
        rows[name] = dict(features=feats, input_mask=arrays["input_mask"], labels=labels,
                          label_weights=arrays["input_mask"].astype(np.float32))  # fmt: skip
    task = _MixTask(feats.shape[1], feats.shape[-1], 32, LENGTH)
    out = train(_config(40), task, str(tmp_path / "tagger"),
                batches=TrainBatches(rows["train"], 32, seed=0))  # fmt: skip
    p = jax.device_get(out.state.params)
    held_out = {k: v[:256] for k, v in rows["eval"].items()}
    pred = np.asarray(
        task.model.apply({"params": p}, held_out["features"], held_out["input_mask"])
    ).argmax(-1)
    w = held_out["label_weights"] > 0
    acc = float((pred == held_out["labels"])[w].mean())
    majority = max(held_out["labels"][w].mean(), 1 - held_out["labels"][w].mean())
    mix = jax.nn.softmax(p["scalar_mix"]["weights"])
    print(f"tagger held-out accuracy {acc:.3f}, majority {majority:.3f}, mix weights {mix}")
    assert acc > majority + 0.05
    assert not math.isclose(float(mix[0]), 1 / 3, abs_tol=1e-4)  # the mix was trained


class _MixTask:
    """ElmoTagger over precomputed layers, as `bert_jax.tasks.feature_ner.FeatureTaggingTask`."""

    def __init__(self, n_layers: int, width: int, batch: int, length: int) -> None:
        import jax.numpy as jnp

        self.model = ElmoTagger(2, lstm_size=64)
        self._shapes = {
            "features": ((batch, n_layers, length, width), jnp.float16),
            "input_mask": ((batch, length), jnp.int32),
            "labels": ((batch, length), jnp.int32),
            "label_weights": ((batch, length), jnp.float32),
        }

    def init_inputs(self):
        return {k: jax.ShapeDtypeStruct(s, d) for k, (s, d) in self._shapes.items()}

    def model_inputs(self, batch):
        return {"layers_BxNxLxF": batch["features"], "input_mask_BxL": batch["input_mask"]}

    def loss_fn(self, params, batch, rng, deterministic):
        import jax.numpy as jnp

        from bert_jax.tasks.train_tasks import cross_entropy

        logits = self.model.apply({"params": params}, **self.model_inputs(batch),
                                  deterministic=deterministic,
                                  rngs=None if deterministic else {"dropout": rng})  # fmt: skip
        w = batch["label_weights"]
        loss = jnp.sum(cross_entropy(logits, batch["labels"]) * w) / (jnp.sum(w) + 1e-5)
        return loss, {"loss": loss}

    def flops_per_step(self, global_batch_size):
        return 1.0
