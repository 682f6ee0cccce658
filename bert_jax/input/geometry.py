"""The shards' geometry against the run's: create-pretraining-data records its settings in a
stats.json beside the shards (or in the --output_dir above them); a pretraining run whose
max_seq_length / max_predictions_per_seq differ is refused before anything is built, with the
exact flags that fix it either way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from etils import epath

from bert_jax.errors import BertJaxError
from bert_jax.input.batches import expand_files

GEOMETRY = ("max_seq_length", "max_predictions_per_seq")


def shard_settings(files: str) -> tuple[epath.Path, dict[str, Any]] | None:
    """(stats.json, its `settings`) of the create-pretraining-data run that wrote the first shard
    `files` names, or None when no stats.json lists it (shards from elsewhere)."""
    first = epath.Path(expand_files(files)[0])
    for folder in (first.parent, first.parent.parent):
        path = folder / "stats.json"
        if not path.exists():
            continue
        try:
            stats = json.loads(path.read_text())
        except (json.JSONDecodeError, OSError):
            continue  # not ours to judge here; the run reads the shards themselves
        names = {epath.Path(f).name for f in stats.get("output_files", [])}
        if first.name in names and isinstance(stats.get("settings"), dict):
            return path, stats["settings"]
    return None


def run_shard_settings(config: Any) -> Iterator[tuple[str, epath.Path, dict[str, Any]]]:
    """(config key, stats.json, settings) for the run's train and eval shards that have one."""
    for key in ("train_files", "eval_files"):
        if config.get(key):
            found = shard_settings(config[key])
            if found is not None:
                yield key, *found


def check_shard_geometry(config: Any) -> None:
    """Raise naming the flags when the run's geometry is not the shards'."""
    for key, path, settings in run_shard_settings(config):
        checked = GEOMETRY
        if settings.get("dynamic_masking") or config.get("dynamic_masking"):
            checked = ("max_seq_length",)  # masks are drawn at training time
        wrong = [k for k in checked if k in settings and settings[k] != config.get(k)]
        if not wrong:
            continue
        theirs = " ".join(f"--config.{k}={settings[k]}" for k in wrong)
        ours = " ".join(f"--{k}={config.get(k)}" for k in wrong)
        have = ", ".join(f"{k}={config.get(k)}" for k in wrong)
        raise BertJaxError(
            f"{config[key]}: the shards have {', '.join(f'{k}={settings[k]}' for k in wrong)} "
            f"({path}), this run {have}: add {theirs}, or rewrite the shards with "
            f"create-pretraining-data {ours}"
        )
