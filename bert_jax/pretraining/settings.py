"""The typed view of a pretraining config's own keys (the model, the objective, the data and the
teacher): what the pretraining task, the encoder config and the pretraining run read, each key
typed once, with its default from the one schema (`bert_jax.train.config.pretrain_config`), as
`bert_jax.train.settings` does for the training keys.

    settings = pretrain_settings(config)   # BertJaxError naming the key
    settings.teacher, settings.vocab_file, settings.mask_prob, ...

A run builds it once, after the shards filled in the geometry the config leaves unset
(`bert_jax.input.geometry.with_shard_geometry`), and hands it on; a function given a config
instead (a test, an experiment) builds it itself. T5's configs (bert_jax/configs/t5.py) have
their own keys and are not read through it."""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any

from bert_jax.train.config import pretrain_config
from bert_jax.train.settings import typed_value


@dataclasses.dataclass(frozen=True)
class PretrainSettings:
    # the model
    model: str
    family: str
    vocab_size: int
    vocab_file: str
    dtype: Any  # a dtype name, or a dtype
    scan_layers: bool
    remat_policy: str
    attention_implementation: str
    hidden_dropout_prob: float
    attention_probs_dropout_prob: float
    embedding_size: int | None  # None: the variant's
    intermediate_size: int | None  # None: the size preset's (not in the base schema)
    hidden_act: str | None  # None: the family's GELU
    generator_size: float
    # the objective and its data
    objective: str
    train_files: Any  # comma-separated patterns, or a list of them
    eval_files: Any
    dynamic_masking: bool
    masked_lm_prob: float
    mask_prob: float | None  # None: the objective's mix
    random_prob: float | None
    max_seq_length: int | None  # None: the shards' (filled in by the run)
    max_predictions_per_seq: int | None
    pack_sequences: int | None
    global_batch_size: int
    eval_batch_size: int
    max_eval_steps: int
    seed: int
    # where the weights come from and go
    init_checkpoint: str
    teacher: str
    student_layers: int
    export_hf_dir: str


_TYPES = typing.get_type_hints(PretrainSettings)
_NOT_IN_SCHEMA = {"intermediate_size": None}


def pretrain_settings(config: Any) -> PretrainSettings:
    """The typed pretraining keys of `config` (a PretrainSettings is returned as it is); keys the
    config lacks take the schema's value."""
    if isinstance(config, PretrainSettings):
        return config
    defaults = _defaults()
    values = {key: typed_value(key, config.get(key, default), _TYPES[key])
              for key, default in defaults.items()}  # fmt: skip
    return PretrainSettings(**values)


@functools.cache
def _defaults() -> dict[str, Any]:
    """Each field's value in the schema (built once per process)."""
    schema = pretrain_config()
    return {f.name: _NOT_IN_SCHEMA[f.name] if f.name in _NOT_IN_SCHEMA else schema[f.name]
            for f in dataclasses.fields(PretrainSettings)}  # fmt: skip
