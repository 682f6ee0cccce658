"""Layer-wise learning-rate decay (ELECTRA's fine-tuning): with decay d and L layers, layer i
moves at d^(L - i) of the rate, the embeddings at d^(L + 1), pooler and task head at the full
rate; the same for looped and scanned layouts, and for shared layers a one-line refusal."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax.core import meta

from bert_jax.arch.bert.heads import BertForSequenceClassification
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.model.scan import stack_layers
from bert_jax.train.optimizer import make_optimizer
from bert_jax.train.validate import check_training_config

CONFIG = BertConfig(
    vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=8,
)  # fmt: skip
IDS = np.ones((1, 4), np.int32)


def _params(config: BertConfig) -> dict:
    model = BertForSequenceClassification(config, num_labels=3)
    abstract = meta.unbox(jax.eval_shape(model.init, jax.random.key(0), IDS, IDS))["params"]
    return jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), abstract)


def _first_update(params: dict, decay: float) -> dict:
    """AdamW's first step with unit gradients, no clip, no weight decay: -lr per element, times
    the layer's multiplier."""
    config = ml_collections.ConfigDict(dict(
        optimizer="adamw", learning_rate=1.0, train_steps=10, warmup_steps=0, schedule="constant",
        weight_decay=0.0, max_grad_norm=0.0, adam_eps=1e-12, layerwise_lr_decay=decay,
    ))  # fmt: skip
    tx, _ = make_optimizer(config)
    ones = jax.tree.map(lambda x: jnp.ones(x.shape, x.dtype), params)
    updates, _ = tx.update(ones, tx.init(ones), ones)
    return updates


def _close(actual, expected) -> None:
    np.testing.assert_allclose(actual, expected, rtol=1e-5)  # Adam's bias correction in f32


def test_each_layer_moves_at_its_depths_rate():
    d, L = 0.8, CONFIG.num_hidden_layers
    u = _first_update(_params(CONFIG), d)
    emb, enc = u["bert"]["embeddings"], u["bert"]["encoder"]
    _close(emb["word_embeddings"]["embedding"], -(d**4))
    _close(emb["layer_norm"]["scale"], -(d ** (L + 1)))
    for i in range(L):
        _close(enc[f"layer_{i}"]["attention"]["query"]["kernel"], -(d ** (L - i)))
    _close(u["bert"]["pooler"]["kernel"], -1.0)
    _close(u["classifier"]["kernel"], -1.0)

    scanned = _first_update(stack_layers(_params(CONFIG)), d)["bert"]["encoder"]
    for ours, looped in zip(
        jax.tree.leaves(scanned), jax.tree.leaves(stack_layers(u)["bert"]["encoder"]), strict=True
    ):
        _close(ours, looped)
    plain = _first_update(_params(CONFIG), 1.0)  # off: every update is -lr
    for x in jax.tree.leaves(plain):
        _close(x, -1.0)


def test_shared_layers_and_bad_values_are_refused():
    shared = CONFIG.replace(share_layers="all")
    with pytest.raises(BertJaxError, match=r"layerwise_lr_decay: the encoder shares its layers"):
        _first_update(_params(shared), 0.8)
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(BertJaxError, match=r"config.layerwise_lr_decay=.*must be in \(0, 1\]"):
            check_training_config(ml_collections.ConfigDict({"layerwise_lr_decay": bad}))
