"""Up-front checks of a training config: a value that would train on nothing, train backwards or
poison the weights is refused with one line naming the key, before any model is built or any
file is written. `bert_jax.train.settings.train_settings` (the typed view every run reads)
calls `check_training_config` first.
"""

from __future__ import annotations

import math
from typing import Any

from bert_jax.errors import BertJaxError
from bert_jax.task_family_key import RENAMED_KEYS, TASK_FAMILIES, renamed_key_message


def _number(config: Any, key: str) -> float | None:
    value = config.get(key)
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise BertJaxError(f"config.{key}={value!r}: expected a number") from None


def check_training_config(config: Any) -> None:
    lr = _number(config, "learning_rate")
    if lr is not None and not (math.isfinite(lr) and lr >= 0):
        raise BertJaxError(f"config.learning_rate={lr}: must be a finite number >= 0")
    steps = _number(config, "train_steps")
    if steps is not None and steps < 1:
        epochs = _number(config, "num_train_epochs")
        hint = f" (num_train_epochs={epochs} gives no steps)" if epochs is not None else ""
        raise BertJaxError(f"config.train_steps={int(steps)}: must be >= 1{hint}")
    for key in ("global_batch_size", "train_batch_size", "grad_accum_steps"):
        value = _number(config, key)
        if value is not None and (value < 1 or value != int(value)):
            raise BertJaxError(f"config.{key}={config.get(key)}: must be an integer >= 1")
    seed = _number(config, "seed")
    if seed is not None and not 0 <= seed < 2**32:
        raise BertJaxError(f"config.seed={int(seed)}: must be in [0, 2**32)")
    warmup = _number(config, "warmup_steps")
    if warmup is not None and warmup < 0:
        raise BertJaxError(f"config.warmup_steps={int(warmup)}: must be >= 0")
    decay = _number(config, "layerwise_lr_decay")
    if decay is not None and not 0 < decay <= 1:
        raise BertJaxError(f"config.layerwise_lr_decay={decay}: must be in (0, 1]")
    generator = _number(config, "generator_size")
    if generator is not None and not 0 < generator <= 1:  # read by ELECTRA only; wrong anyway
        raise BertJaxError(
            f"config.generator_size={generator}: must be in (0, 1], the generator's width as a "
            "fraction of the discriminator's (ELECTRA's best: 0.25 to 0.5)"
        )
    mesh = config.get("mesh")
    if mesh is not None:
        for axis, size in dict(mesh).items():
            if size != -1 and (not isinstance(size, int) or size < 1):
                raise BertJaxError(f"config.mesh.{axis}={size}: must be >= 1, or -1 for the rest")


def check_renamed_keys(cfg: Any) -> None:
    """Refuse a fine-tuning config that still sets a renamed key, naming the new one: `family`
    set to a task family, or beside `task_family` (a pretraining config's `family` is its model
    family, not an old fine-tuning key)."""
    for old, new in RENAMED_KEYS.items():
        if old in cfg and (new in cfg or cfg[old] in TASK_FAMILIES):
            raise BertJaxError(renamed_key_message(old))


def check_finetune_config(cfg: Any) -> None:
    """Fine-tuning's own up-front checks, before the tokenizer, weights or data are loaded:
    every (learning rate, epochs, batch size) it would run must train on something, and no key
    is one that was renamed (`family` -> `task_family`), which would otherwise be ignored."""
    check_renamed_keys(cfg)
    if "task_family" not in cfg:  # e.g. a pretraining config handed to `finetune`
        raise BertJaxError(
            f"config: not a fine-tuning config (no task_family; start from one of "
            f"{', '.join(f'{t}.py' for t in sorted(TASK_FAMILIES))} in bert_jax/configs/)"
        )
    if cfg.get("sweep"):
        lrs, epochs, batches = cfg.sweep_learning_rates, cfg.sweep_epochs, cfg.sweep_batch_sizes
        keys = ("sweep_learning_rates", "sweep_epochs", "sweep_batch_sizes")
    else:
        lrs, epochs, batches = [cfg.learning_rate], [cfg.num_train_epochs], [cfg.train_batch_size]
        keys = ("learning_rate", "num_train_epochs", "train_batch_size")
    for key, values, ok, need in (
        (keys[0], lrs, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0"),
        (keys[1], epochs, lambda v: math.isfinite(v) and v > 0, "a number > 0"),
        (keys[2], batches, lambda v: v >= 1 and v == int(v), "an integer >= 1"),
    ):
        for value in values:
            try:
                good = ok(float(value))
            except (TypeError, ValueError):
                good = False
            if not good:
                raise BertJaxError(f"config.{key}={value!r}: must be {need}")
    head_lr = _number(cfg, "head_learning_rate")
    if head_lr:  # 0 = the new layers share the encoder's rate
        lrs = [float(v) for v in lrs]
        if not (math.isfinite(head_lr) and head_lr > 0 and min(lrs) > 0):
            raise BertJaxError(f"config.head_learning_rate={head_lr} (learning_rate "
                               f"{', '.join(map(str, lrs))}): both must be > 0")  # fmt: skip
