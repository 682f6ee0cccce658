"""Compile a jitted step for given devices and say whether it fits in HBM.

    report = compile_step(trainer.train_step, (abstract_state, batch_specs), hbm_per_device)
    print(format_report(report))
    report.fits  # False when XLA's TPU compiler ran out of HBM or the buffers exceed it

Works for compile-only TPU devices (bert_jax.aot.topology) and for the attached devices at the
start of a TPU run. The TPU compiler itself rejects a program that does not fit
("RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm ..."); that is caught and reported
as `fits=False` with XLA's own numbers. cost_analysis() FLOPs are per device and count a while
loop's body once, so with scan_layers (or grad_accum_steps > 1) they are far below the model
FLOPs; the report says so instead of hiding the gap.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from bert_jax.errors import BertJaxError

MiB = 1024**2
GiB = 1024**3
SMALL_PARAM_BYTES = 256 * 1024  # unsharded params below this are summarised in one line


@dataclasses.dataclass(frozen=True)
class StepMemory:
    argument_bytes: int
    output_bytes: int
    alias_bytes: int  # outputs written into donated arguments
    temp_bytes: int
    code_bytes: int

    @property
    def peak_bytes(self) -> int:
        """Arguments + non-aliased outputs + temporaries + program: what must be resident."""
        out = self.output_bytes - self.alias_bytes
        return self.argument_bytes + out + self.temp_bytes + self.code_bytes


@dataclasses.dataclass
class CompileReport:
    num_devices: int
    hbm_per_device: int
    memory: StepMemory | None  # None when the compiler refused the program (out of memory)
    compiler_error: str | None = None  # XLA's out-of-memory message, one line
    xla_flops_per_device: float | None = None
    xla_bytes_per_device: float | None = None  # cost_analysis()'s "bytes accessed"
    model_flops_per_step: float | None = None
    loops_in_step: bool = False  # scanned layers / microbatches: XLA counts a loop body once
    unsharded: list[tuple[str, tuple[int, ...], int]] = dataclasses.field(default_factory=list)
    compiled: Any = None  # the executable, callable with the same shardings

    @property
    def fits(self) -> bool:
        return self.memory is not None and self.memory.peak_bytes <= self.hbm_per_device

    @property
    def required_bytes(self) -> float | None:
        if self.memory is not None:
            return float(self.memory.peak_bytes)
        return parse_required_bytes(self.compiler_error or "")


_OOM_RE = re.compile(r"(RESOURCE_EXHAUSTED|[Rr]an out of memory|exceeds available HBM)")
_SIZE_RE = re.compile(r"\(([\d.]+)([KMGT]?)\)")


def parse_required_bytes(message: str) -> float | None:
    """XLA's 'memory required ... (98.96G) exceeds available HBM (15.75G)' -> 98.96 GiB."""
    m = _SIZE_RE.search(message)
    if not m:
        return None
    scale = {"": 1, "K": 1024, "M": MiB, "G": GiB, "T": 1024 * GiB}[m.group(2)]
    return float(m.group(1)) * scale


def is_out_of_memory(err: BaseException) -> bool:
    return bool(_OOM_RE.search(str(err)))


def compile_step(
    jitted: Any,
    args: Sequence[Any],
    hbm_per_device: int,
    params: Any = None,
    model_flops_per_step: float | None = None,
    loops_in_step: bool = False,
) -> CompileReport:
    """Lower `jitted` on abstract `args` (ShapeDtypeStructs with shardings), compile, measure.

    `params`: the abstract parameter tree, to list which parameters stay unsharded."""
    lowered = jitted.lower(*args)
    num_devices = len(_devices_of(args))
    unsharded = unsharded_params(params) if params is not None else []
    report = CompileReport(
        num_devices=num_devices,
        hbm_per_device=int(hbm_per_device),
        memory=None,
        model_flops_per_step=model_flops_per_step,
        loops_in_step=loops_in_step,
        unsharded=unsharded,
    )
    try:
        compiled = lowered.compile()
    except Exception as e:  # XLA raises JaxRuntimeError / XlaRuntimeError
        if not is_out_of_memory(e):
            raise
        report.compiler_error = _one_line(str(e))
        return report
    mem = compiled.memory_analysis()
    report.memory = StepMemory(
        argument_bytes=int(mem.argument_size_in_bytes),
        output_bytes=int(mem.output_size_in_bytes),
        alias_bytes=int(mem.alias_size_in_bytes),
        temp_bytes=int(mem.temp_size_in_bytes),
        code_bytes=int(mem.generated_code_size_in_bytes),
    )
    cost = compiled.cost_analysis()
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    if cost and "flops" in cost:
        report.xla_flops_per_device = float(cost["flops"])
    if cost and "bytes accessed" in cost:
        report.xla_bytes_per_device = float(cost["bytes accessed"])
    report.compiled = compiled
    return report


def _one_line(msg: str) -> str:
    for line in msg.splitlines():
        if _OOM_RE.search(line):
            return line.strip()
    return msg.strip().splitlines()[0] if msg.strip() else msg


def _devices_of(args: Sequence[Any]) -> list[Any]:
    for leaf in jax.tree.leaves(args):
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None:
            return list(sharding.mesh.devices.flat)
    raise BertJaxError(
        "compile_step: arguments carry no sharding (need ShapeDtypeStruct(sharding=))"
    )


def unsharded_params(params: Any) -> list[tuple[str, tuple[int, ...], int]]:
    """(path, shape, bytes per device) of every parameter replicated on all devices, largest
    first."""
    out = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        sharding = getattr(leaf, "sharding", None)
        if sharding is None or not sharding.is_fully_replicated:
            continue
        nbytes = int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
        out.append((jax.tree_util.keystr(path, simple=True, separator="/"), leaf.shape, nbytes))
    return sorted(out, key=lambda t: -t[2])


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def format_report(report: CompileReport, title: str = "") -> str:
    lines = [title] if title else []
    hbm = report.hbm_per_device
    if report.memory is not None:
        m = report.memory
        lines += [
            f"per device ({report.num_devices} devices), HBM {_gib(hbm)}:",
            f"  arguments   {_gib(m.argument_bytes)}",
            f"  outputs     {_gib(m.output_bytes)} ({_gib(m.alias_bytes)} in donated arguments)",
            f"  temporaries {_gib(m.temp_bytes)}",
            f"  program     {_gib(m.code_bytes)}",
            f"  peak        {_gib(m.peak_bytes)} = {100 * m.peak_bytes / hbm:.0f}% of HBM"
            f" -> {'fits' if report.fits else 'DOES NOT FIT'}",
        ]
    else:
        need = report.required_bytes
        lines += [
            f"per device ({report.num_devices} devices), HBM {_gib(hbm)}: DOES NOT FIT",
            f"  XLA: {report.compiler_error}",
        ]
        if need is not None:
            lines.append(f"  XLA needs {_gib(need)} beyond what is available")
    if report.xla_flops_per_device is not None:
        total = report.xla_flops_per_device * report.num_devices
        lines.append(f"XLA FLOPs per step (all devices): {total:.4g}")
    if report.model_flops_per_step is not None:
        lines.append(f"model FLOPs per step (6N + attention, no remat): "
                     f"{report.model_flops_per_step:.4g}")  # fmt: skip
    if report.loops_in_step and report.xla_flops_per_device is not None:
        lines.append("  (XLA counts a loop body once: scanned layers / microbatches make its "
                     "count smaller than the model's)")  # fmt: skip
    big = [u for u in report.unsharded if u[2] >= SMALL_PARAM_BYTES]
    small = [u for u in report.unsharded if u[2] < SMALL_PARAM_BYTES]
    total = sum(u[2] for u in report.unsharded)
    lines.append(
        f"unsharded parameters: {len(report.unsharded)} ({total / MiB:.1f} MiB per device)"
    )
    lines += [f"  {p:<60} {str(tuple(s)):<18} {b / MiB:8.1f} MiB" for p, s, b in big]
    if small:
        lines.append(f"  + {len(small)} smaller (biases, norms): "
                     f"{sum(u[2] for u in small) / MiB:.1f} MiB")  # fmt: skip
    return "\n".join(lines)
