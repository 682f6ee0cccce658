"""The peak FLOP/s that a step's model FLOPs (each architecture's formula: `Architecture.
pretraining_flops`, e.g. `bert_jax.arch.bert.flops`) are compared against for MFU: the chip's
datasheet figure, or on CPU the measured matmul rate."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from bert_jax.accelerators import GPU_PEAKS, TPU_CHIPS

_MEASURED: dict[str, float] = {}


def measured_matmul_peak(
    device: jax.Device | None = None, n: int = 1024, fresh: bool = False
) -> float:
    """FLOP/s of a float32 n x n matmul chain on one device (the CPU denominator): the best
    measured in this process; `fresh` probes again (a busy machine measures low)."""
    device = device or jax.devices()[0]
    key = f"{device.platform}:{n}"
    if key in _MEASURED and not fresh:
        return _MEASURED[key]
    a = jax.device_put(jnp.ones((n, n), jnp.float32) / n, device)
    reps = 8

    @jax.jit
    def chain(x):
        for _ in range(reps):
            x = x @ a
        return x

    chain(a).block_until_ready()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        chain(a).block_until_ready()
        best = min(best, time.perf_counter() - t)
    _MEASURED[key] = max(_MEASURED.get(key, 0.0), reps * 2.0 * n**3 / best)
    return _MEASURED[key]


def peak_flops(devices: list[jax.Device]) -> tuple[float, str]:
    """Total peak FLOP/s of `devices` and a label saying where it comes from.

    A TPU's peak is per chip and a v2/v3 chip is two devices, so the total is the per-device
    peak times the devices; a GPU in `GPU_PEAKS` is one device. On CPU (or an unlisted GPU)
    the peak is one measured matmul: CPU fake devices share the same cores."""
    d0 = devices[0]
    chip = TPU_CHIPS.get(d0.device_kind) if d0.platform == "tpu" else None
    if chip is not None:
        return chip.peak_flops_per_device * len(devices), f"{d0.device_kind} bf16 peak"
    gpu = GPU_PEAKS.get(d0.device_kind) if d0.platform == "gpu" else None
    if gpu is not None:
        return gpu * len(devices), f"{d0.device_kind} bf16 peak"
    # A device of this process: with several processes, d0 may belong to another one.
    device = jax.local_devices()[0]
    return measured_matmul_peak(device), f"measured {device.platform.upper()} f32 matmul"
