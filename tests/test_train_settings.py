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
