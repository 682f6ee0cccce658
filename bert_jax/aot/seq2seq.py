"""The encoder-decoder pretraining step (span corruption, `bert_jax.pretraining.seq2seq_task`),
compiled ahead of time for a TPU slice from any machine: T5-base / T5-large fit rows.

    report, trainer = compile_seq2seq("t5-v1_1-base", "v5p:2x2x1", global_batch_size=128)
    print(format_report(report)); report.fits

The trainer is the one every run builds (`build_trainer` over `make_mesh(config.mesh)`), so the
logical axes of the decoder and cross-attention are sharded by the same rules table.
"""

from __future__ import annotations

import ml_collections

from bert_jax.aot.fit import CompileReport
from bert_jax.aot.pretraining import compile_trainer
from bert_jax.aot.topology import resolve_slice
from bert_jax.model.seq2seq import seq2seq_preset
from bert_jax.objectives.span_corruption import random_spans_helper
from bert_jax.pretraining.seq2seq_task import Seq2SeqTask
from bert_jax.train import build_trainer, make_mesh
from bert_jax.train.config import training_config


def compile_seq2seq(
    preset: str,
    topology: str,
    global_batch_size: int = 128,
    inputs_length: int = 512,
    dtype: str = "bfloat16",
    scan_layers: bool = True,
    remat_policy: str = "full",
    mesh: dict | None = None,
) -> tuple[CompileReport, object]:
    """T5's pretraining shapes: inputs of `inputs_length`, targets as span corruption needs."""
    tpu = resolve_slice(topology)
    cfg = seq2seq_preset(preset, dtype=dtype, scan_layers=scan_layers, remat_policy=remat_policy)
    _, targets_length = random_spans_helper(inputs_length)
    task = Seq2SeqTask(cfg, global_batch_size, inputs_length, targets_length)
    config = training_config()
    config.mesh = ml_collections.ConfigDict(mesh or {"data": 1, "fsdp": -1, "tensor": 1})
    trainer = build_trainer(config, task, make_mesh(config.mesh, tpu.devices()))
    return compile_trainer(trainer, tpu.hbm_per_device), trainer
