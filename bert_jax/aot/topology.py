"""TPU slices by name: gcloud accelerator types (`v4-32`, `v5litepod-16`) or JAX topology names
(`v4:2x2x4`, `v5e:4x4`), their compile-only devices, HBM and peak FLOP/s per JAX device.

    s = resolve_slice("v4-32")     # TpuSlice(topology="v4:2x2x4", chips=16, hosts=4, ...)
    devices = s.devices()          # 16 compile-only TPU devices (needs libtpu, no TPU)

Naming (Cloud TPU docs): v2/v3/v4/v5p accelerator types count TensorCores (2 per chip), v5e
(`v5litepod-N`) and v6e count chips. A v3 chip is two JAX devices (one per core, 16 GiB each);
v4 and v5p chips are one device each (megacore). HBM is the vendor figure; on a real TPU
`device.memory_stats()['bytes_limit']` is used instead (see bert_jax.aot.fit). Peak FLOP/s and
devices per chip come from the one table, bert_jax.accelerators.TPU_CHIPS, that MFU uses too.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import Any

from bert_jax.accelerators import TPU_CHIPS, TpuChip
from bert_jax.errors import BertJaxError

GiB = 1024**3


@dataclasses.dataclass(frozen=True)
class Generation:
    name: str  # JAX topology prefix
    gcloud_prefix: str  # accelerator-type prefix
    counts_cores: bool  # accelerator-type number counts TensorCores (2 per chip), not chips
    dims: int  # 2D torus/mesh or 3D
    hbm_per_device: int  # bytes
    runtime_version: str  # TPU VM image (gcloud --version)
    device_kinds: tuple[str, ...]  # JAX's device_kind; the first is TPU_CHIPS' key

    @property
    def chip(self) -> TpuChip:
        return TPU_CHIPS[self.device_kinds[0]]

    @property
    def devices_per_chip(self) -> int:
        return self.chip.devices_per_chip

    @property
    def peak_flops_per_chip(self) -> float:  # dense bf16
        return self.chip.peak_flops


GENERATIONS = {
    g.name: g
    for g in (
        Generation("v3", "v3", True, 2, 16 * GiB, "tpu-ubuntu2204-base", ("TPU v3",)),
        Generation("v4", "v4", True, 3, 32 * GiB, "tpu-ubuntu2204-base", ("TPU v4",)),
        Generation(
            "v5e", "v5litepod", False, 2, 16 * GiB, "v2-alpha-tpuv5-lite",
            ("TPU v5 lite", "TPU v5e"),
        ),
        Generation("v5p", "v5p", True, 3, 95 * GiB, "v2-alpha-tpuv5", ("TPU v5", "TPU v5p")),
        Generation(
            "v6e", "v6e", False, 2, 32 * GiB, "v2-alpha-tpuv6e", ("TPU v6 lite", "TPU v6e")
        ),
    )
}  # fmt: skip
_ALIASES = {"v5litepod": "v5e", "v5lite": "v5e", "v6": "v6e"}
CHIPS_PER_HOST = 4  # every generation here, except single-host 8-chip v5e/v6e slices


@dataclasses.dataclass(frozen=True)
class TpuSlice:
    generation: Generation
    shape: tuple[int, ...]  # chips along each torus axis

    @property
    def chips(self) -> int:
        return math.prod(self.shape)

    @property
    def num_devices(self) -> int:
        return self.chips * self.generation.devices_per_chip

    @property
    def hosts(self) -> int:
        return max(1, self.chips // self._chips_per_host()[0])

    @property
    def topology(self) -> str:
        return f"{self.generation.name}:" + "x".join(map(str, self.shape))

    @property
    def accelerator_type(self) -> str:
        g = self.generation
        n = self.chips * (2 if g.counts_cores else 1)
        return f"{g.gcloud_prefix}-{n}"

    @property
    def hbm_per_device(self) -> int:
        return self.generation.hbm_per_device

    @property
    def peak_flops_per_device(self) -> float:
        return self.generation.chip.peak_flops_per_device

    def _chips_per_host(self) -> tuple[int, tuple[int, int, int] | None]:
        # v5e/v6e slices of up to 8 chips are one host (v5litepod-8 is 2x4 on one VM).
        if not self.generation.counts_cores and self.chips <= 8:
            x, y = (self.shape + (1,))[:2]
            return self.chips, (x, y, 1)
        return CHIPS_PER_HOST, None

    def topology_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.generation.name == "v4":
            kwargs["chip_config_name"] = "megacore"  # one JAX device per chip, as on a v4 VM
        bounds = self._chips_per_host()[1]
        if bounds is not None:
            kwargs["chips_per_host_bounds"] = bounds
        return kwargs

    def devices(self) -> list[Any]:
        """Compile-only devices of this slice (libtpu's topology description; no TPU needed)."""
        # Several processes on one machine may compile for TPU at once (tests, the table script);
        # without this libtpu takes an exclusive lock on /tmp/libtpu_lockfile.
        os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
        require_libtpu()
        try:
            from jax.experimental import topologies

            desc = topologies.get_topology_desc(
                platform="tpu", topology_name=self.topology, **self.topology_kwargs()
            )
        except ImportError as e:
            raise BertJaxError(f"{LIBTPU_MISSING} ({e})") from e
        except Exception as e:  # libtpu reports bad layouts as runtime errors
            if "TPU support not installed" in str(e):  # jax found no libtpu
                raise BertJaxError(LIBTPU_MISSING) from None
            raise BertJaxError(f"topology {self.topology}: {str(e).splitlines()[0]}") from None
        devices = list(desc.devices)
        if len(devices) != self.num_devices:
            raise BertJaxError(
                f"topology {self.topology}: libtpu gave {len(devices)} devices, "
                f"expected {self.num_devices}"
            )
        return devices


# pyproject.toml's `tpu` extra is jax[tpu], which brings libtpu.
LIBTPU_MISSING = (
    "compiling for a TPU slice needs libtpu (its compile-only TPU devices), which the tpu extra "
    "installs: pip install 'bert-jax[tpu]' (from a checkout: pip install -e '.[tpu]')"
)


def require_libtpu() -> None:
    """Refuse, before any work, when libtpu is not installed (jax's own error names no fix)."""
    try:
        import libtpu  # noqa: F401
    except ImportError:
        raise BertJaxError(LIBTPU_MISSING) from None


def _shape_for_chips(chips: int, dims: int) -> tuple[int, ...]:
    """The standard slice shape for a power-of-two chip count (v4-32 -> 2x2x4, v5e-32 -> 4x8)."""
    if chips < 1 or chips & (chips - 1):
        raise ValueError(f"{chips} chips is not a power of two")
    if dims == 2:
        x = 1 << (chips.bit_length() - 1) // 2
        return (x, chips // x)
    if chips < 4:
        raise ValueError("3D slices have at least 4 chips")
    if chips == 4:
        return (2, 2, 1)
    shape = [1, 1, 1]
    while math.prod(shape) < chips:
        shape[shape.index(min(shape))] *= 2
    return tuple(sorted(shape))


def resolve_slice(name: str) -> TpuSlice:
    """`v4-32`, `v5litepod-16`, `v5e-256`, `v6e-8`, `v5p-64`, `v3-32` or `v4:2x2x4`, `v5e:4x4`."""
    name = name.strip().lower()
    m = re.fullmatch(r"(v\d\w*?)[:](\d+(?:x\d+){1,2})", name)
    if m:
        gen = _generation(m.group(1), name)
        shape = tuple(int(s) for s in m.group(2).split("x"))
        if gen.dims == 2 and len(shape) == 3 and shape[2] == 1:
            shape = shape[:2]
        if len(shape) != gen.dims:
            raise BertJaxError(f"topology {name!r}: {gen.name} slices have {gen.dims} dimensions")
        return TpuSlice(gen, shape)
    m = re.fullmatch(r"(v\d\w*?)-(\d+)", name)
    if not m:
        raise BertJaxError(
            f"topology {name!r}: use an accelerator type (v4-32, v5litepod-16, v5p-64, v6e-256, "
            f"v3-32) or a topology (v4:2x2x4, v5e:4x4)"
        )
    gen = _generation(m.group(1), name)
    n = int(m.group(2))
    chips = n // 2 if gen.counts_cores else n
    try:
        return TpuSlice(gen, _shape_for_chips(chips, gen.dims))
    except ValueError as e:
        raise BertJaxError(f"accelerator type {name!r}: {e}") from None


def _generation(prefix: str, name: str) -> Generation:
    gen = GENERATIONS.get(_ALIASES.get(prefix, prefix))
    if gen is None:
        raise BertJaxError(f"topology {name!r}: unknown TPU generation {prefix!r}; known: "
                           f"{', '.join(GENERATIONS)}")  # fmt: skip
    return gen


def generation_of_device(device: Any) -> Generation | None:
    kind = getattr(device, "device_kind", "")
    for gen in GENERATIONS.values():
        if kind in gen.device_kinds:
            return gen
    return None
