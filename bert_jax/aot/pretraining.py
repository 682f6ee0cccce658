"""The `bert-jax pretrain` step, compiled for a TPU slice from any machine, and the fit check
`bert-jax pretrain` runs on TPU before reading data.

    report, trainer = compile_pretraining(config, "v4-32")    # compile-only devices, no TPU
    print(format_report(report)); report.fits
    check_trainer_fits(trainer, config)   # on the attached TPU: raises BertJaxError if no fit

Mesh, task and train step come from the pretraining code itself (bert_jax.train:
`make_mesh(config.mesh, devices)`, `build_trainer`; the task from `pretraining_task_of`, which
`bert-jax pretrain` calls too), so what compiles here is exactly what `bert-jax pretrain` would
run.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import jax

from bert_jax.aot.fit import CompileReport, compile_step, format_report
from bert_jax.aot.topology import TpuSlice, generation_of_device, resolve_slice
from bert_jax.arch import registry
from bert_jax.errors import BertJaxError
from bert_jax.input.geometry import RunShards
from bert_jax.pretraining.settings import pretrain_settings
from bert_jax.pretraining.task import PretrainingTask, bert_config_from, pretraining_task
from bert_jax.train import build_trainer, make_mesh

if TYPE_CHECKING:
    from bert_jax.arch.seq2seq.train_task import Seq2SeqTask


def pretraining_task_of(
    config: Any, shapes_only: bool = False, shards: RunShards | None = None
) -> PretrainingTask | Seq2SeqTask:
    """The task a pretraining run of `config` trains: T5's for an encoder-decoder objective,
    DistilBERT's for a config.teacher, else the encoder objective's. What `bert-jax compile`
    compiles and runs.pretrain trains (T5's own run builds the same task). `shapes_only`
    (compiling) reads no shards and no teacher weights; `shards`: the run's stats.json records
    (read by the checks themselves when None)."""
    # Here, not in bert_jax.pretraining: the seq2seq task (arch/seq2seq) sits above that package.
    if registry.for_objective(config.objective).task_kind == "encoder_decoder":
        from bert_jax.arch.seq2seq.pretraining_task import seq2seq_pretraining_task

        return seq2seq_pretraining_task(config, with_data=not shapes_only, shards=shards)
    run = pretrain_settings(config)
    if run.teacher:  # the student is derived from the teacher's config
        from bert_jax.pretraining.distillation import distillation_task

        return distillation_task(run, shapes_only=shapes_only, shards=shards)
    return pretraining_task(run, bert_config_from(run, shards))


def build_pretraining_trainer(config: Any, devices: list[Any]) -> Any:
    task = pretraining_task_of(config, shapes_only=True)
    return build_trainer(config, task, make_mesh(config.mesh, devices))


def compile_trainer(trainer: Any, hbm_per_device: int) -> CompileReport:
    state = trainer.abstract_state()
    model = getattr(trainer.task, "bert_config", None) or trainer.task.model.config  # student
    return compile_step(
        trainer.train_step,
        (state, trainer.batch_specs()),
        hbm_per_device,
        params=state.params,
        model_flops_per_step=trainer.flops_per_step,
        loops_in_step=bool(model.scan_layers) or trainer.grad_accum_steps > 1,
    )


def compile_pretraining(config: Any, topology: str | TpuSlice) -> tuple[CompileReport, Any]:
    """Compile the pretraining step of `config` for a slice (`v4-32`, `v5e:4x4`, ...)."""
    tpu = resolve_slice(topology) if isinstance(topology, str) else topology
    trainer = build_pretraining_trainer(config, tpu.devices())
    return compile_trainer(trainer, tpu.hbm_per_device), trainer


def suggestions(config: Any, trainer: Any) -> list[str]:
    """Config changes that lower memory per device, most effective first."""
    out = []
    mesh = trainer.mesh.shape
    batch = next(iter(trainer.task.init_inputs().values())).shape[0]
    accum = trainer.grad_accum_steps
    micro = batch // (mesh["data"] * mesh["fsdp"]) // accum  # sequences per device per microbatch
    if micro > 1:
        out.append(
            f"--config.grad_accum_steps={accum * 2} (same global batch {batch}, half the "
            f"activations: {micro} -> {micro // 2} sequences per device per microbatch)"
        )
        out.append(f"--config.global_batch_size={batch // 2} (changes the recipe)")
    if config.get("remat_policy", "none") in ("none", "dots_no_batch"):
        out.append("--config.remat_policy=full (recompute layer activations in the backward pass)")
    if mesh["data"] > 1:
        n = mesh["data"] * mesh["fsdp"]
        out.append(f"--config.mesh.data=1 --config.mesh.fsdp={n} (shard parameters and "
                   "optimizer state over all devices)")  # fmt: skip
    return out


def not_fit_message(report: CompileReport, config: Any, trainer: Any, where: str) -> str:
    need = report.required_bytes
    hbm = report.hbm_per_device / 1024**3
    what = f"needs {need / 1024**3:.2f} GiB" if need else "does not fit"
    tips = "; ".join(suggestions(config, trainer)) or "use a larger slice"
    return (
        f"the train step does not fit on {where}: {what} per device, HBM {hbm:.2f} GiB. Try {tips}"
    )


def _hbm_of(device: Any) -> int:
    stats = {}
    with contextlib.suppress(Exception):  # compile-only devices and some runtimes have none
        stats = device.memory_stats() or {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    gen = generation_of_device(device)
    if gen is None:
        raise BertJaxError(f"unknown TPU {getattr(device, 'device_kind', device)!r}: HBM unknown")
    return gen.hbm_per_device


def check_trainer_fits(trainer: Any, config: Any, verbose: bool = True) -> CompileReport | None:
    """On TPU: compile the step for the attached devices and raise a BertJaxError with knobs to
    turn if it does not fit. Elsewhere (CPU, GPU) returns None without compiling."""
    devices = list(trainer.mesh.devices.flat)
    if devices[0].platform != "tpu":
        return None
    local = [d for d in devices if d.process_index == jax.process_index()] or devices
    report = compile_trainer(trainer, _hbm_of(local[0]))  # memory_stats needs a local device
    if not report.fits:
        where = f"{len(devices)} x {devices[0].device_kind}"
        raise BertJaxError(not_fit_message(report, config, trainer, where))
    if verbose and jax.process_index() == 0:
        print(format_report(report, "memory check before training:"), flush=True)
    return report
