"""MFU's denominator on TPU: one table of per-chip peaks (bert_jax.accelerators.TPU_CHIPS) read by
the training loop and by `bert-jax compile`, checked on libtpu's compile-only devices (the
device_kind and device count a real slice reports). A v3 chip is two JAX devices, so counting
the chip's peak once per device would report MFU on v3 at half."""

from __future__ import annotations

import pytest

from bert_jax.accelerators import TPU_CHIPS
from bert_jax.aot.topology import GENERATIONS, resolve_slice
from bert_jax.train.flops import peak_flops


@pytest.mark.parametrize(
    "name, chips, peak_per_chip",
    [("v3-8", 4, 123e12), ("v4-8", 4, 275e12), ("v5litepod-4", 4, 197e12)],
)
def test_slice_peak_is_chips_times_the_chip_peak(name, chips, peak_per_chip):
    tpu = resolve_slice(name)
    devices = tpu.devices()
    assert tpu.chips == chips
    total, label = peak_flops(devices)
    assert total == pytest.approx(chips * peak_per_chip)  # v3-8: 8 devices, 4 chips
    assert label == f"{devices[0].device_kind} bf16 peak"
    assert tpu.peak_flops_per_device * tpu.num_devices == pytest.approx(total)  # `compile` agrees


def test_every_generation_reads_the_one_table():
    for gen in GENERATIONS.values():
        for kind in gen.device_kinds:
            assert TPU_CHIPS[kind] == gen.chip, kind


def test_a_listed_gpu_reads_its_datasheet_peak_not_a_probe():
    """An H100 was measured against a float32 matmul probe (its TF32 rate), not its bf16 peak."""
    from types import SimpleNamespace

    from bert_jax.accelerators import GPU_PEAKS

    h100 = SimpleNamespace(platform="gpu", device_kind="NVIDIA H100 80GB HBM3")
    assert peak_flops([h100]) == (989e12, "NVIDIA H100 80GB HBM3 bf16 peak")
    assert GPU_PEAKS["NVIDIA H200"] == 989e12
