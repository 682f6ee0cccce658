"""What every fine-tuning run sets up, for the encoder runner (`bert_jax.runs.finetune`) and the
text-to-text one (`bert_jax.arch.seq2seq.text_to_text`): the run's config, its mesh, where its
files go."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from typing import Any

import jax
from etils import epath

from bert_jax.atomic_write import write_json_atomic
from bert_jax.errors import BertJaxError
from bert_jax.train import mesh as mesh_lib


def write_json(obj: Any, path: str | epath.Path) -> None:
    if jax.process_index() == 0:
        write_json_atomic(path, obj, sort_keys=True)


@contextlib.contextmanager
def output_dir(workdir: epath.Path) -> Iterator[str]:
    """Where a job writes prediction files: the workdir on process 0; a scratch directory,
    deleted afterwards, on the others (they compute the same metrics, so the files would be
    identical copies)."""
    if jax.process_index() == 0:
        yield str(workdir)
        return
    with tempfile.TemporaryDirectory(prefix="bert-jax-predictions-") as scratch:
        yield scratch


def run_config(cfg, num_examples: int, lr: float, epochs: float, batch: int, seed: int):
    """The config of one run: a copy of the fine-tuning config with this run's hyperparameters and
    train_steps = int(examples / batch * epochs), warmup_steps = train_steps x warmup_proportion."""
    if cfg.train_steps or cfg.warmup_steps:
        raise BertJaxError(
            "fine-tuning derives train_steps and warmup_steps from the data: set "
            "num_train_epochs and warmup_proportion instead"
        )
    run = cfg.copy_and_resolve_references()
    steps = max(1, int(num_examples / batch * epochs))
    run.learning_rate, run.num_train_epochs, run.train_batch_size = lr, epochs, batch
    run.seed = seed
    run.train_steps = steps
    run.warmup_steps = int(steps * cfg.warmup_proportion)
    return run


def run_mesh(cfg):
    """The configured mesh over all devices, or over the first `num_devices` (0 = all)."""
    devices = jax.devices()
    if cfg.num_devices:
        devices = devices[: cfg.num_devices]
    return mesh_lib.make_mesh(cfg.mesh, devices)
