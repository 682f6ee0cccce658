"""The typed view of the training keys (bert_jax.train.settings): one schema's defaults, typed
values, the checks run once, and the engine reading it."""

from __future__ import annotations

import dataclasses

import ml_collections
import pytest

from bert_jax.errors import BertJaxError
from bert_jax.train.config import finetune_config, pretrain_config, training_config
from bert_jax.train.settings import TrainSettings, train_settings


def test_every_setting_is_a_schema_key_and_missing_keys_take_the_schema_default():
    schema = training_config()
    assert {f.name for f in dataclasses.fields(TrainSettings)} <= set(schema)
    partial = ml_collections.ConfigDict(dict(learning_rate=3e-4, train_steps="7"))
    s = train_settings(partial)
    assert s.learning_rate == 3e-4 and s.train_steps == 7 and isinstance(s.train_steps, int)
    assert s.schedule == schema.schedule and s.keep_checkpoints == schema.keep_checkpoints
    assert s.mesh == dict(schema.mesh)


def test_recipes_keep_their_own_values():
    assert train_settings(pretrain_config("tiny")).schedule == "reference"
    run = finetune_config("glue")
    run.train_steps = 10  # a fine-tuning run's, from its epochs
    assert train_settings(run).log_every_steps == 50
    s = train_settings(pretrain_config("tiny"))
    assert train_settings(s) is s  # a view passes through


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("grad_accum_steps", "two", "config.grad_accum_steps='two': expected a number"),
        ("keep_checkpoints", "three", "config.keep_checkpoints='three': expected int"),
        ("async_checkpoints", "yes", "config.async_checkpoints='yes': expected True or False"),
        ("learning_rate", -1.0, "config.learning_rate=-1.0: must be a finite number >= 0"),
        ("dropout_prng", "philox", "config.dropout_prng='philox': use one of ('auto', "),
    ],
)
def test_a_bad_value_is_named(key, value, message):
    c = {**training_config().to_dict(), "train_steps": 10, key: value}  # any mapping is a config
    with pytest.raises(BertJaxError) as e:
        train_settings(c)
    assert str(e.value).startswith(message)


def test_the_task_families_are_the_schemas():
    from bert_jax.task_family_key import TASK_FAMILIES
    from bert_jax.train import config

    assert tuple(config._FAMILY_KEYS) == TASK_FAMILIES


@pytest.mark.slow  # three tiny train steps compiled (~15 s)
def test_dropout_masks_from_xla_generator_are_their_own_and_repeat():
    """dropout_prng=rbg draws other masks than threefry (other losses from the same weights and
    batch), the same ones again from the same step (a rerun, a resume), and trains."""
    import jax
    import numpy as np

    from bert_jax.config import preset
    from bert_jax.pretraining.task import PretrainingTask
    from bert_jax.train import build_trainer, make_mesh

    task = PretrainingTask(preset("tiny", vocab_size=300), 4, 16, 3)
    mesh = make_mesh(ml_collections.ConfigDict(dict(data=1, fsdp=1, tensor=1)), jax.devices()[:1])
    rs = np.random.RandomState(0)
    batch = {k: rs.randint(0, 2, s.shape).astype(s.dtype) for k, s in task.init_inputs().items()}
    batch["input_ids"] = rs.randint(5, 300, (4, 16)).astype(np.int32)
    batch["input_mask"][:] = 1
    batch["masked_lm_weights"][:] = 1.0
    losses = {}
    for impl in ("threefry", "rbg", "rbg"):
        config = dict(training_config().to_dict(), train_steps=10, dropout_prng=impl)
        trainer = build_trainer(config, task, mesh)
        state, metrics = trainer.train_step(trainer.init_state(), batch)
        losses.setdefault(impl, []).append(float(metrics["loss"]))
    assert np.isfinite(losses["rbg"]).all()
    assert losses["rbg"][0] == losses["rbg"][1]  # the same step draws the same masks
    assert losses["rbg"][0] != losses["threefry"][0]  # and they are not threefry's
