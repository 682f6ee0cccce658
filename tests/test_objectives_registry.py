"""The objectives registry is the one source of truth: for every registered objective, the data
pipeline writes the features the objective declares, TensorFlow parses them with that schema,
the input pipeline reads them (static and dynamic masks) and the pretraining task trains on them."""

from __future__ import annotations

import pkgutil

import jax
import ml_collections
import numpy as np
import pytest

from bert_jax import objectives
from bert_jax.config import preset
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.errors import BertJaxError
from bert_jax.input import PretrainInput
from bert_jax.objectives.masking import MaskingSpec
from bert_jax.pretraining.task import PretrainingTask
from bert_jax.train import build_trainer, make_mesh
from bert_jax.train.config import pretrain_config

L, P = 48, 8


def test_every_objective_module_is_registered_once():
    modules = {
        m.name
        for m in pkgutil.iter_modules(objectives.__path__)
        if m.name not in ("base", "losses", "masking", "baselines")  # helpers, not objectives
    }
    registered = {o.loss.__module__.rsplit(".", 1)[1] for o in objectives.REGISTRY.values()}
    registered |= {o.make_example.__module__.rsplit(".", 1)[1] for o in objectives.SEQ2SEQ.values()}
    # A planned objective may have its functions in place before it is registered.
    assert registered <= modules and modules - registered <= set(objectives.PLANNED)
    flags = [o.data_flag for o in objectives.REGISTRY.values() if o.data_flag]
    assert len(flags) == len(set(flags))
    assert objectives.get("nsp") is objectives.get("mlm_nsp")


def test_planned_and_unknown_objectives_are_clear_errors():
    for name in objectives.PLANNED:  # e.g. span_corruption, until its module exists
        with pytest.raises(BertJaxError, match="planned but not built"):
            objectives.get(name)
    with pytest.raises(BertJaxError, match="use one of"):
        objectives.get("mlm_nps")


@pytest.fixture(scope="module")
def shards(tmp_path_factory, uncased_vocab):
    """Static and dynamic shards of every objective, from real English text."""
    out = {}
    for name in objectives.names():
        for dynamic in (False, True):
            d = tmp_path_factory.mktemp(f"{name}-{dynamic}")
            stats = create_pretraining_data(
                "embedded:40", str(d), str(uncased_vocab), num_shards=1, objective=name,
                dynamic_masking=dynamic, max_seq_length=L, max_predictions_per_seq=P,
                dupe_factor=1,
            )  # fmt: skip
            out[name, dynamic] = (d, stats)
    return out


@pytest.mark.parametrize("name", objectives.names())
def test_shards_hold_the_declared_features(shards, name):
    import tensorflow as tf

    spec = objectives.get(name)
    for dynamic in (False, True):
        directory, stats = shards[name, dynamic]
        schema = spec.shard_schema(L, P, static_masks=not dynamic)
        assert stats["features"] == [f.name for f in schema]
        assert stats["objective"] == name
        assert len(stats["embedded_corpus"]["sha256"]) == 64
        dtypes = {"int64": tf.int64, "float32": tf.float32}
        parse = {f.name: tf.io.FixedLenFeature([f.length], dtypes[f.dtype]) for f in schema}
        files = [str(p) for p in directory.glob("*.tfrecord")]
        records = list(tf.data.TFRecordDataset(files).take(4).as_numpy_iterator())
        assert records
        for record in records:
            parsed = tf.io.parse_single_example(record, parse)
            assert set(parsed) == {f.name for f in schema}
            example = tf.train.Example.FromString(record)
            assert set(example.features.feature) == {f.name for f in schema}


@pytest.mark.slow
@pytest.mark.parametrize("name", objectives.names())
def test_each_objective_trains_from_its_shards(shards, uncased_vocab, name):
    config = pretrain_config("tiny")
    spec = objectives.get(name)
    bert = preset("tiny", vocab_size=30522, max_position_embeddings=64, causal=spec.causal)
    task = PretrainingTask(bert, 8, L, P, objective=name)
    one_device = ml_collections.ConfigDict({"data": 1, "fsdp": 1, "tensor": 1})
    mesh = make_mesh(one_device, jax.devices()[:1])
    trainer = build_trainer(config, task, mesh)
    state = trainer.init_state()
    masking = MaskingSpec.from_vocab_file(str(uncased_vocab))
    for dynamic in (False, True):
        directory, _ = shards[name, dynamic]
        batches = PretrainInput(
            str(directory / "*.tfrecord"), 8, L, P, objective=name, prefetch=0,
            dynamic_masking=masking if dynamic and spec.masking else None,
        )  # fmt: skip
        batch = next(batches)
        assert set(batch) == set(task.init_inputs())
        assert spec.predicted_tokens(batch) > 0
        state, metrics = trainer.train_step(state, batch)
        metrics = jax.device_get(metrics)
        assert np.isfinite(metrics["loss"])
        sentence = spec.sentence_head
        assert (f"{sentence}_loss" in metrics) == (sentence is not None)


def test_one_prediction_per_sequence_keeps_its_axis(uncased_vocab, tmp_path):
    """max_predictions_per_seq=1: the masked-LM arrays stay [B, 1] (only the sentence label is
    squeezed), so the reader's batch reaches the model and a step trains. Before, every
    length-1 feature was squeezed to [B] and the model's gather failed."""
    spec = objectives.get("mlm_nsp")
    shapes = spec.batch_shapes(4, L, 1)
    assert shapes["masked_lm_positions"][0] == (4, 1)
    assert shapes["next_sentence_labels"][0] == (4,)
    create_pretraining_data(
        "embedded:40", str(tmp_path), str(uncased_vocab), num_shards=1, max_seq_length=L,
        max_predictions_per_seq=1, dupe_factor=1,
    )  # fmt: skip
    task = PretrainingTask(preset("tiny", vocab_size=30522), 4, L, 1)
    mesh = make_mesh(ml_collections.ConfigDict({"data": 1, "fsdp": 1, "tensor": 1}),
                     jax.devices()[:1])  # fmt: skip
    trainer = build_trainer(pretrain_config("tiny"), task, mesh)
    batch = next(PretrainInput(str(tmp_path / "*.tfrecord"), 4, L, 1, prefetch=0))
    assert batch["masked_lm_ids"].shape == (4, 1)
    _, metrics = trainer.train_step(trainer.init_state(), batch)
    assert np.isfinite(jax.device_get(metrics)["loss"])
