"""TPU chips by JAX's `device_kind`: peak dense bf16 FLOP/s (the vendors' published figures) and
JAX devices per chip. The one table behind MFU (bert_jax.train.flops) and the slice catalogue
(bert_jax.aot.topology). Imports nothing, so tpu_setup/ reads it without JAX. NVIDIA GPUs (one
JAX device each) have their own table, for `--scale host` runs on one GPU."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class TpuChip:
    peak_flops: float  # dense bf16 FLOP/s of one chip
    devices_per_chip: int  # v2/v3 show each TensorCore as a device; v4 on, one (megacore)
    hbm_bandwidth: float | None = None  # bytes/s of one chip's HBM (Google's TPU pages)

    @property
    def peak_flops_per_device(self) -> float:
        return self.peak_flops / self.devices_per_chip

    @property
    def hbm_bandwidth_per_device(self) -> float | None:
        return None if self.hbm_bandwidth is None else self.hbm_bandwidth / self.devices_per_chip


TPU_CHIPS = {
    "TPU v2": TpuChip(45e12, 2),
    "TPU v3": TpuChip(123e12, 2, 900e9),
    "TPU v4": TpuChip(275e12, 1, 1200e9),
    "TPU v5 lite": TpuChip(197e12, 1, 819e9),
    "TPU v5e": TpuChip(197e12, 1, 819e9),
    "TPU v5": TpuChip(459e12, 1, 2765e9),
    "TPU v5p": TpuChip(459e12, 1, 2765e9),
    "TPU v6 lite": TpuChip(918e12, 1, 1638e9),
    "TPU v6e": TpuChip(918e12, 1, 1638e9),
}


# NVIDIA's datasheet figures for dense bf16 tensor-core FLOP/s (half the "with sparsity" ones),
# by the CUDA device name JAX reports as `device_kind`.
GPU_PEAKS = {
    "NVIDIA A100-SXM4-40GB": 312e12,
    "NVIDIA A100-SXM4-80GB": 312e12,
    "NVIDIA H100 PCIe": 756e12,
    "NVIDIA H100 80GB HBM3": 989e12,  # SXM5
    "NVIDIA H200": 989e12,
}
