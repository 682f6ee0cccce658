"""The roofline of a compiled train step on a TPU slice, without the TPU: XLA's FLOPs and bytes
per device (`cost_analysis()`), the chip's peak and HBM bandwidth, and the bytes an ideally fused
step cannot avoid moving.

    roofline = step_roofline(report, trainer, tpu, "bfloat16")
    print(format_roofline(roofline))

A step takes at least max(FLOPs / peak, bytes / bandwidth); the model FLOPs done in that time
bound its MFU. The analytic minimum counts, per device: the optimizer update reading the
parameters, both Adam moments and the gradients and writing the first three back; the gradients
written once; the weights read twice (forward, backward) in the compute dtype; the activations
the backward pass needs, written once and read once (the architecture's own count:
`saved_elements`). It leaves out what a good compiler can avoid (logits that stay inside a fused
cross-entropy, dropout masks regenerated from their seed, attention probabilities recomputed as
flash attention does), so XLA's bytes over it say how far the step is from ideal fusion.

XLA's bytes count every operand and output of every instruction wherever it lives; on a TPU
much of that is on-chip memory (a v4's CMEM), which HBM's bandwidth does not limit. The HBM
bytes (`hlo_census`: the arrays the compiled HLO places in HBM, an asynchronous prefetch counted
at its HBM end) give a second bound, with HBM's bandwidth the only memory limit: what the step
could reach if on-chip traffic were free. The truth lies between the two bounds; only a TPU
can say where.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import numpy as np

from bert_jax.aot.fit import CompileReport
from bert_jax.aot.hlo_census import Census, hlo_census


@dataclasses.dataclass(frozen=True)
class Roofline:
    peak_flops: float  # per device
    bandwidth: float  # HBM bytes/s per device
    xla_flops: float  # per device
    xla_bytes: float  # per device
    model_flops: float  # per device
    minimum: dict[str, float]  # part -> bytes per device; empty when there is no formula
    hbm_bytes: float | None = None  # per device, from the compiled HLO's memory spaces

    @property
    def arithmetic_s(self) -> float:
        """At peak, for XLA's FLOPs or the model's if more: a step does at least the model's,
        and XLA's count can fall short of them (on v5e, BERT-base's 1.90e12 against 2.24e12)."""
        return max(self.xla_flops, self.model_flops) / self.peak_flops

    @property
    def memory_s(self) -> float:
        return self.xla_bytes / self.bandwidth

    @property
    def mfu_bound(self) -> float:
        """The model FLOPs over what the chip could do in the compiled step's roofline time."""
        return self.model_flops / self.peak_flops / max(self.arithmetic_s, self.memory_s)

    @property
    def hbm_memory_s(self) -> float | None:
        return self.hbm_bytes / self.bandwidth if self.hbm_bytes else None

    @property
    def hbm_mfu_bound(self) -> float | None:
        """The bound with only the bytes the compiled step moves in HBM."""
        if not self.hbm_bytes:
            return None
        return self.model_flops / self.peak_flops / max(self.arithmetic_s, self.hbm_memory_s)

    @property
    def hbm_over_minimum(self) -> float | None:
        low = self.minimum_bytes
        return self.hbm_bytes / low if low and self.hbm_bytes else None

    @property
    def minimum_bytes(self) -> float | None:
        return sum(self.minimum.values()) if self.minimum else None

    @property
    def bytes_over_minimum(self) -> float | None:
        low = self.minimum_bytes
        return self.xla_bytes / low if low else None

    @property
    def ideal_mfu_bound(self) -> float | None:
        """The bound with the model's FLOPs and only the minimum bytes."""
        low = self.minimum_bytes
        if not low:
            return None
        compute_s = self.model_flops / self.peak_flops
        return compute_s / max(compute_s, low / self.bandwidth)


def _device_bytes(tree: Any) -> float:
    """Bytes one device holds of a tree of sharded ShapeDtypeStructs."""
    total = 0.0
    for leaf in jax.tree.leaves(tree):
        shape = leaf.sharding.shard_shape(leaf.shape) if leaf.sharding is not None else leaf.shape
        total += math.prod(shape) * np.dtype(leaf.dtype).itemsize
    return total


def minimum_bytes(trainer: Any, compute_dtype: str, global_batch_size: int) -> dict[str, float]:
    """The analytic minimum's parts, per device (empty when the task has no activation count)."""
    count = getattr(trainer.task, "saved_elements", None)
    saved = count(global_batch_size) if count is not None else None
    if saved is None:
        return {}
    state = trainer.abstract_state()
    mesh = dict(trainer.mesh.shape)
    itemsize = np.dtype(compute_dtype).itemsize
    params_dev, moments_dev = _device_bytes(state.params), _device_bytes(state.opt_state)
    param_elems = sum(math.prod(p.shape) for p in jax.tree.leaves(state.params))
    replicas = mesh.get("data", 1) * mesh.get("fsdp", 1)  # the batch is split over these
    return {
        "optimizer update": 2 * (params_dev + moments_dev) + params_dev,
        "gradients written": params_dev,
        "weights read (forward, backward)": 2 * param_elems * itemsize / mesh.get("tensor", 1),
        "activations kept for the backward": 2 * saved * itemsize / replicas,
    }


def step_roofline(
    report: CompileReport,
    trainer: Any,
    tpu: Any,
    compute_dtype: str,
    global_batch_size: int,
    census: Census | None = None,
) -> Roofline | None:
    """The roofline of a compiled step; None when XLA gave no FLOPs or bytes, the chip's
    bandwidth is unknown, or the step has loops (XLA counts a loop body once). Its HBM bytes come
    from `census` when the caller has the step's census already, else from one read here."""
    chip = tpu.generation.chip
    bandwidth = chip.hbm_bandwidth_per_device
    if report.loops_in_step or bandwidth is None:
        return None
    if not report.xla_flops_per_device or not report.xla_bytes_per_device:
        return None
    if census is None and report.compiled is not None:
        census = hlo_census(report.compiled.as_text())
    hbm = (census.total_hbm_bytes or None) if census is not None else None
    return Roofline(
        peak_flops=chip.peak_flops_per_device,
        bandwidth=bandwidth,
        xla_flops=report.xla_flops_per_device,
        xla_bytes=report.xla_bytes_per_device,
        model_flops=(report.model_flops_per_step or 0.0) / report.num_devices,
        minimum=minimum_bytes(trainer, compute_dtype, global_batch_size),
        hbm_bytes=hbm,
    )


def format_roofline(r: Roofline, chip_label: str = "") -> str:
    bound = "memory" if r.memory_s > r.arithmetic_s else "compute"
    lines = [
        f"roofline per device{f' ({chip_label})' if chip_label else ''}: peak "
        f"{r.peak_flops / 1e12:.0f} TFLOP/s, HBM {r.bandwidth / 1e9:.0f} GB/s",
        f"  XLA FLOPs {r.xla_flops:.3g} ({1e3 * r.xla_flops / r.peak_flops:.2f} ms at peak), "
        "XLA bytes "
        f"{r.xla_bytes:.3g} ({1e3 * r.memory_s:.2f} ms at full bandwidth): {bound}-bound",
        f"  model FLOPs {r.model_flops:.3g}: MFU bound {100 * r.mfu_bound:.1f}% for this "
        "compiled step",
    ]
    if r.hbm_bytes:
        lines.append(
            f"  HBM bytes {r.hbm_bytes:.3g} ({1e3 * r.hbm_memory_s:.2f} ms; XLA's "
            f"bytes less the on-chip memory's): MFU bound {100 * r.hbm_mfu_bound:.1f}% with "
            "on-chip traffic free"
        )
    if r.minimum:
        parts = ", ".join(f"{k} {v:.3g}" for k, v in r.minimum.items())
        hbm = f", HBM bytes / minimum: {r.hbm_over_minimum:.2f}x" if r.hbm_bytes else ""
        lines += [
            f"  analytic minimum bytes {r.minimum_bytes:.3g} ({parts})",
            f"  XLA's bytes / minimum: {r.bytes_over_minimum:.2f}x{hbm}; at the minimum the MFU "
            f"bound would be {100 * r.ideal_mfu_bound:.1f}%",
        ]
    else:
        lines.append("  analytic minimum bytes: no activation count for this model")
    return "\n".join(lines)
