"""The device mesh ('data', 'fsdp', 'tensor') and shardings derived from logical axis names.

Parameters carry logical names (`vocab`, `embed`, `mlp`, `heads`, ...; see bert_jax.model.layers);
the rules table (config `logical_axis_rules`, first match wins) maps them to mesh axes. Batches
are split along their leading axis over ('data', 'fsdp').
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from bert_jax.errors import BertJaxError

MESH_AXES = ("data", "fsdp", "tensor")
BATCH_AXES = ("data", "fsdp")

# (logical name, mesh axis or None). FSDP shards the hidden dimension of every weight; tensor
# parallelism shards heads, the MLP and the vocabulary.
DEFAULT_RULES: tuple[tuple[str, Any], ...] = (
    ("batch", BATCH_AXES),
    ("vocab", "tensor"),
    ("embed", "fsdp"),
    ("embed_out", "tensor"),
    ("mlp", "tensor"),
    ("heads", "tensor"),
    ("kv", None),
    ("layers", None),
    ("position", None),
    ("segment", None),
    ("classes", None),
)


def mesh_shape(sizes: Sequence[int], num_devices: int) -> tuple[int, ...]:
    """Resolve one -1 entry to the remaining devices; check the product."""
    sizes = [int(s) for s in sizes]
    if sizes.count(-1) > 1:
        raise BertJaxError(f"mesh sizes {sizes}: at most one axis may be -1")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if num_devices % known:
            raise BertJaxError(
                f"mesh sizes {sizes}: {num_devices} devices not divisible by {known}"
            )
        sizes[sizes.index(-1)] = num_devices // known
    if math.prod(sizes) != num_devices:
        raise BertJaxError(
            f"mesh data x fsdp x tensor = {sizes} needs {math.prod(sizes)} devices, "
            f"{num_devices} available"
        )
    return tuple(sizes)


def make_mesh(mesh_config: Any, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """`mesh_config` maps data, fsdp and tensor to ints (one may be -1): a config's `mesh`
    ConfigDict or a TrainSettings' dict."""
    devices = list(jax.devices() if devices is None else devices)
    sizes = [int(dict(mesh_config)[axis]) for axis in MESH_AXES]
    if -1 not in sizes and devices[0].platform == "cpu" and math.prod(sizes) < len(devices):
        devices = devices[: math.prod(sizes)]  # CPU runs may use some of the (fake) devices
    shape = mesh_shape(sizes, len(devices))
    if len(devices) == len(jax.devices()):
        return jax.make_mesh(shape, MESH_AXES, axis_types=(AxisType.Auto,) * 3, devices=devices)
    return Mesh(np.array(devices).reshape(shape), MESH_AXES, axis_types=(AxisType.Auto,) * 3)


def rules_from_config(rules: Any) -> tuple[tuple[str, Any], ...]:
    """Config rules (lists from JSON/ConfigDict) -> tuple form flax expects."""
    if rules is None:
        return DEFAULT_RULES
    out = []
    for name, axes in rules:
        if isinstance(axes, list | tuple):
            axes = tuple(axes)
        out.append((str(name), axes))
    return tuple(out)


def logical_shardings(boxed_tree: Any, mesh: Mesh, rules: Sequence) -> Any:
    """NamedShardings for a tree of (abstract) values boxed with logical names; unboxed leaves are
    replicated."""
    specs = nn.get_partition_spec(boxed_tree)
    return nn.logical_to_mesh_sharding(specs, mesh, rules)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def check_batch(global_batch_size: int, mesh: Mesh, microbatches: int = 1) -> None:
    n = mesh.shape["data"] * mesh.shape["fsdp"]
    if global_batch_size % microbatches:
        raise BertJaxError(
            f"global_batch_size {global_batch_size} not divisible by "
            f"grad_accum_steps {microbatches}"
        )
    if (global_batch_size // microbatches) % n:
        raise BertJaxError(
            f"microbatch size {global_batch_size // microbatches} not divisible by "
            f"mesh data x fsdp = {n}"
        )
