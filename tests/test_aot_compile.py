"""Ahead-of-time compilation of the real `bert-jax pretrain` step (BERT-base) for TPU slices on
this CPU machine, with libtpu's compile-only devices: a single-host v4-8 and a 4-host v5e-16.

Checked against things we did not write: libtpu's own topology (devices, hosts), transformers'
parameter count of BERT-base (argument bytes per device must be the FSDP share of parameters +
AdamW moments), XLA's TPU compiler refusing a batch that does not fit in 16 GiB."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import jax
import pytest

pytest.importorskip("libtpu", reason="libtpu (pip install 'jax[tpu]') is not installable here")

from tpu_compile import least_effort  # noqa: E402

from bert_jax.aot.pretraining import compile_pretraining  # noqa: E402
from bert_jax.aot.topology import resolve_slice  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent
BERT_BASE_PARAMS = 110_106_428  # transformers BertForPreTraining(BertConfig()), tied decoder
GiB = 1024**3


def pretrain_config(preset: str = "base", **overrides):
    path = REPO / "experiments" / "configs" / "pretrain.py"
    spec = importlib.util.spec_from_file_location("pretrain_cfg", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    c = module.get_config(preset)
    c.update(overrides)
    return c


@pytest.mark.parametrize(
    "name, devices, hosts, kind",
    [
        ("v4-8", 4, 1, "TPU v4"),
        ("v4-32", 16, 4, "TPU v4"),
        ("v3-32", 32, 4, "TPU v3"),
        ("v5litepod-16", 16, 4, "TPU v5 lite"),
        ("v5e-8", 8, 1, "TPU v5 lite"),
        ("v5p-64", 32, 8, "TPU v5"),
        ("v6e:16x16", 256, 64, "TPU v6 lite"),
    ],
)
def test_slice_names_match_libtpu_topologies(name, devices, hosts, kind):
    s = resolve_slice(name)
    devs = s.devices()
    assert len(devs) == devices == s.num_devices
    assert len({d.process_index for d in devs}) == hosts == s.hosts
    assert {d.device_kind for d in devs} == {kind}
    # The 8 fake CPU devices of the test process are untouched by the compile-only TPU ones.
    assert [d.platform for d in jax.devices()] == ["cpu"] * 8


@pytest.fixture(scope="module")
def v4_base():
    config = pretrain_config(scan_layers=True, global_batch_size=64)
    with least_effort():
        return compile_pretraining(config, "v4:2x2x1")


@pytest.mark.slow  # BERT-base compiled for a TPU slice: 238 s in its fixture (shared machine)
def test_bert_base_compiles_for_a_single_host_v4_and_fits(v4_base):
    report, trainer = v4_base
    assert report.compiled is not None and report.fits
    assert {d.platform for d in trainer.mesh.devices.flat} == {"tpu"}
    assert dict(trainer.mesh.shape) == {"data": 1, "fsdp": 4, "tensor": 1}
    m = report.memory
    # float32 params + AdamW mu and nu, FSDP-sharded over 4 chips, plus the (tiny) batch.
    expected = 3 * 4 * BERT_BASE_PARAMS / 4
    assert expected <= m.argument_bytes <= 1.25 * expected, m
    assert m.alias_bytes >= 0.95 * expected  # the state is donated: updated in place
    assert 0 < m.peak_bytes < 32 * GiB
    assert sum(b for _, _, b in report.unsharded) < 4 * 1024**2  # only biases and norms
    assert report.xla_flops_per_device and report.model_flops_per_step


@pytest.mark.slow  # BERT-base compiled for a TPU slice: 204 s (shared machine)
def test_bert_base_compiles_for_a_multi_host_v5e(v4_base):
    config = pretrain_config(scan_layers=True, global_batch_size=64)
    with least_effort():
        report, trainer = compile_pretraining(config, "v5e:4x4")
    devs = list(trainer.mesh.devices.flat)
    assert len(devs) == 16 and len({d.process_index for d in devs}) == 4  # 4 hosts
    assert report.fits
    # 4x the chips -> a quarter of the sharded state per chip (same model, same optimizer).
    v4_args = v4_base[0].memory.argument_bytes
    assert 0.2 * v4_args < report.memory.argument_bytes < 0.3 * v4_args


def test_compile_command_fails_with_knobs_when_the_step_does_not_fit(tmp_path):
    env = dict(os.environ, ALLOW_MULTIPLE_LIBTPU_LOAD="1")
    proc = subprocess.run(
        [sys.executable, "-m", "bert_jax.cli", "compile",
         "--config", str(REPO / "experiments/configs/pretrain.py:base"), "--topology", "v5e-4",
         "--config.scan_layers=True", "--config.global_batch_size=4096"],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "DOES NOT FIT" in proc.stdout
    err = proc.stderr.strip().splitlines()[-1]
    assert err.startswith("bert-jax: error: the train step does not fit on v5litepod-4"), err
    assert "--config.grad_accum_steps=2" in err and "--config.remat_policy=full" in err


def test_start_of_run_check_names_the_knobs_on_tpu_devices():
    from bert_jax.aot.pretraining import build_pretraining_trainer, check_trainer_fits
    from bert_jax.errors import BertJaxError

    devices = resolve_slice("v5e-4").devices()
    huge = pretrain_config("tiny", global_batch_size=1 << 18)
    with pytest.raises(BertJaxError, match="does not fit on 4 x TPU v5 lite") as e:
        check_trainer_fits(build_pretraining_trainer(huge, devices), huge)
    assert "--config.grad_accum_steps=2" in str(e.value)
    # On CPU devices the check does nothing (no compile).
    cpu = pretrain_config("tiny", global_batch_size=8)
    cpu.mesh.data, cpu.mesh.fsdp = 1, -1
    assert check_trainer_fits(build_pretraining_trainer(cpu, jax.devices()), cpu) is None
