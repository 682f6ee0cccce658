"""`bert-jax compile`: ahead-of-time compile the pretraining step for a TPU slice, on any machine.

  bert-jax compile --config pretrain.py:base --topology v4-32 \\
      [--config.global_batch_size=1024 --config.remat_policy=full ...]

Builds the mesh, shardings and train step `bert-jax pretrain` would run on that slice (libtpu's
compile-only devices; `pip install 'bert-jax[tpu]'`), compiles it and prints per device the
argument, output and temporary bytes against HBM, XLA's FLOPs next to the model FLOPs, and the
parameters left unsharded; then the step's roofline (bert_jax.aot.roofline): XLA's FLOPs and
bytes per device against the chip's peak and HBM bandwidth, the bound they put on MFU, and XLA's
bytes over the analytic minimum; the same for the bytes the compiled HLO places in HBM (on-chip
memory left out). `--hlo_census=N` adds what the bytes are spent on, by kind of
instruction, and the N largest (bert_jax.aot.hlo_census). Exits non-zero, naming knobs to turn,
when the step does not fit.
--topology takes accelerator types (v3-32, v4-32, v5litepod-16, v5p-64, v6e-256) or JAX
topology names (v4:2x2x4, v5e:4x4).
"""

from __future__ import annotations

from absl import flags
from ml_collections import config_flags

from bert_jax.errors import BertJaxError

_CONFIG = config_flags.DEFINE_config_file(
    "config",
    None,
    "a config by name or path: pretrain.py:<preset> (tiny..large, L4-H256), pretrain_phase2.py, "
    "t5.py:<small|base>, distill.py:tpu",
)
_TOPOLOGY = flags.DEFINE_string("topology", None, "v4-32, v5litepod-16, v5p-64, v5e:4x4, ...")
_CENSUS = flags.DEFINE_integer(
    "hlo_census", 0, "also print the compiled step's HLO census with its N largest instructions"
)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise BertJaxError(f"unexpected arguments: {' '.join(argv[1:])}")
    if _CONFIG.value is None:
        raise BertJaxError("--config is required, e.g. pretrain.py:base")
    if not _TOPOLOGY.value:
        raise BertJaxError("--topology is required, e.g. v4-32 or v5e:4x4")
    from bert_jax.aot.fit import format_report
    from bert_jax.aot.pretraining import compile_pretraining, not_fit_message
    from bert_jax.aot.topology import require_libtpu, resolve_slice

    require_libtpu()  # without the tpu extra: how to install it, before building anything
    config = _CONFIG.value
    tpu = resolve_slice(_TOPOLOGY.value)
    if config.get("aot_teacher_model"):  # task distillation (distill.py:tpu)
        _compile_distillation(config, tpu)
        return
    report, trainer = compile_pretraining(config, tpu)
    mesh = dict(trainer.mesh.shape)
    title = (
        f"{tpu.topology} ({tpu.accelerator_type}: {tpu.chips} chips, {tpu.hosts} hosts), "
        f"mesh {mesh}, model {config.model}, batch {config.global_batch_size} x "
        f"{config.max_seq_length} tokens, {config.dtype}, remat {config.remat_policy}, "
        f"grad_accum_steps {config.get('grad_accum_steps', 1)}"
    )
    print(format_report(report, title), flush=True)
    if not report.fits:
        where = f"{tpu.accelerator_type} ({tpu.num_devices} devices)"
        raise BertJaxError(not_fit_message(report, config, trainer, where))
    peak = tpu.peak_flops_per_device * tpu.num_devices
    print(
        f"at 100% MFU a step would take {1e3 * trainer.flops_per_step / peak:.1f} ms "
        f"({tpu.generation.peak_flops_per_chip / 1e12:.0f} TFLOP/s bf16 per chip)"
    )
    _print_accounting(report, trainer, tpu, config)


def _print_accounting(report, trainer, tpu, config) -> None:
    from bert_jax.aot.hlo_census import format_census, hlo_census
    from bert_jax.aot.roofline import format_roofline, step_roofline

    census = hlo_census(report.compiled.as_text()) if report.compiled is not None else None
    roofline = step_roofline(
        report, trainer, tpu, config.dtype, config.global_batch_size, census=census
    )
    if roofline is not None:
        print(format_roofline(roofline, tpu.generation.device_kinds[0]))
    elif report.loops_in_step:
        print("roofline: not computed; XLA counts a loop body once (compile with "
              "--config.scan_layers=False --config.grad_accum_steps=1 for it)")  # fmt: skip
    else:
        print(f"roofline: not computed (no HBM bandwidth for {tpu.accelerator_type}, or no "
              "FLOPs and bytes from XLA)")  # fmt: skip
    if _CENSUS.value > 0 and census is not None:
        print(format_census(census, top=_CENSUS.value, label=tpu.accelerator_type))


def _compile_distillation(config, tpu) -> None:
    from bert_jax.aot.fit import format_report
    from bert_jax.tasks.distill.compile import compile_labelling, compile_online_student

    peak = tpu.peak_flops_per_device
    report, rows = compile_labelling(config, tpu)
    hosts = f"{tpu.accelerator_type}: {tpu.hosts} host(s), each labels its own shards"
    print(
        format_report(
            report,
            f"labelling step, {config.aot_teacher_model} teacher, one host "
            f"of {hosts}; {rows} rows x {config.max_seq_length} tokens",
        ),
        flush=True,
    )
    ms = 1e3 * report.model_flops_per_step / (peak * report.num_devices)
    print(
        f"at 100% MFU: {ms:.1f} ms per step, {rows / ms * 1e3 * tpu.hosts:,.0f} rows/s "
        "over the slice\n"
    )
    report2, trainer = compile_online_student(config, tpu)
    print(
        format_report(
            report2,
            f"online student step, {config.aot_student_model} student + "
            f"{config.aot_teacher_model} teacher, mesh {dict(trainer.mesh.shape)}, "
            f"batch {config.train_batch_size} x {config.max_seq_length}",
        ),
        flush=True,
    )
    for r in (report, report2):
        if not r.fits:
            raise BertJaxError(f"does not fit {tpu.accelerator_type}: lower the batch sizes")
