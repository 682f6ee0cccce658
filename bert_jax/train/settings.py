"""The typed view of a run's training keys: what the engine (the loop, the trainer, the
optimizer, the AOT fit check) reads, each key typed and checked once, with its default taken
from the one schema (`bert_jax.train.config.training_config`), never repeated at a read.

    settings = train_settings(config)   # BertJaxError naming the key, before any work
    settings.grad_accum_steps, settings.mesh, ...

A config may be any mapping of keys (an ml_collections ConfigDict from a config file, a test's
own dict); keys it lacks take the schema's value. The whole config (pretraining or fine-tuning
keys included) is still what a workdir's config.json records.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from bert_jax.errors import BertJaxError
from bert_jax.train.config import training_config
from bert_jax.train.mesh import rules_from_config
from bert_jax.train.schedules import DECAY_SHAPES, check_batch_warmup, wsd_decay_steps
from bert_jax.train.validate import check_training_config


@dataclasses.dataclass(frozen=True)
class TrainSettings:
    optimizer: str
    schedule: str
    learning_rate: float
    train_steps: int
    warmup_steps: int
    decay_fraction: float
    decay_shape: str
    weight_decay: float
    adam_b1: float
    adam_b2: float
    adam_eps: float
    max_grad_norm: float
    layerwise_lr_decay: float
    grad_accum_steps: int
    batch_warmup_start: int
    batch_warmup_steps: int
    max_nonfinite_steps: int
    seed: int
    dropout_prng: str
    dtype: str
    log_every_steps: int
    eval_every_steps: int
    checkpoint_every_steps: int
    keep_checkpoints: int
    keep_checkpoint_every_steps: int
    async_checkpoints: bool
    distributed: Any  # False, True, "auto" or jax.distributed.initialize's keywords
    mesh: dict[str, int]
    logical_axis_rules: tuple[tuple[str, Any], ...]


_TYPES = typing.get_type_hints(TrainSettings)
_CASTS = {int: int, float: float, str: str, bool: bool}


def typed_value(key: str, value: Any, annotation: Any) -> Any:
    """config.`key`'s `value` as its settings field's `annotation` says: int, float, str or bool
    (also as `X | None`); None stays None and other annotations take the value as given. Also
    what pretraining's settings (bert_jax.pretraining.settings) read their keys with."""
    if value is None:
        return None
    kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
    if len(kinds) == 1 and type(None) in typing.get_args(annotation):
        annotation = kinds[0]  # X | None
    cast = _CASTS.get(annotation)
    if cast is None:
        return value
    if cast is bool and not isinstance(value, (bool, int)):
        raise BertJaxError(f"config.{key}={value!r}: expected True or False")
    try:
        return cast(value)
    except (TypeError, ValueError):
        raise BertJaxError(f"config.{key}={value!r}: expected {cast.__name__}") from None


def train_settings(config: Any) -> TrainSettings:
    """The checked, typed training keys of `config` (a TrainSettings is returned as it is)."""
    if isinstance(config, TrainSettings):
        return config
    check_training_config(config)
    schema = training_config()
    values = {}
    for field in dataclasses.fields(TrainSettings):
        key = field.name
        value = config[key] if key in config and config[key] is not None else schema[key]
        values[key] = typed_value(key, value, _TYPES[key])
    _check_recipe(values)
    values["mesh"] = {axis: int(size) for axis, size in dict(values["mesh"]).items()}
    values["logical_axis_rules"] = rules_from_config(values["logical_axis_rules"])
    return TrainSettings(**values)


DROPOUT_PRNGS = ("auto", "threefry", "rbg", "unsafe_rbg")


def _check_recipe(values: dict[str, Any]) -> None:
    """The decay and batch-warmup keys, checked even when the schedule does not read them (a
    typo there would otherwise surface only when the schedule is switched)."""
    if values["dropout_prng"] not in DROPOUT_PRNGS:
        raise BertJaxError(
            f"config.dropout_prng={values['dropout_prng']!r}: use one of {DROPOUT_PRNGS}"
        )
    if values["decay_shape"] not in DECAY_SHAPES:
        raise BertJaxError(
            f"config.decay_shape={values['decay_shape']!r}: use one of {DECAY_SHAPES}"
        )
    if not 0.0 < values["decay_fraction"] <= 1.0:
        raise BertJaxError(f"config.decay_fraction={values['decay_fraction']}: must be in (0, 1]")
    if values["schedule"] == "wsd":
        wsd_decay_steps(values["train_steps"], values["warmup_steps"], values["decay_fraction"])
    check_batch_warmup(values["batch_warmup_start"], values["batch_warmup_steps"])
