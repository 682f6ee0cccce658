"""The platform a step is being traced for: the mesh's devices when a mesh is in context (an AOT
compile for a TPU slice on a CPU host), else this process's default backend."""

from __future__ import annotations

import jax

from bert_jax.errors import BertJaxError


def target_platform() -> str:
    mesh = jax.sharding.get_abstract_mesh()
    device = None if mesh.empty else mesh.abstract_device
    platform = device.platform if device is not None else jax.default_backend()
    return "gpu" if platform == "cuda" else platform


def require_platform(implementation: str, platforms: tuple[str, ...], needs: str) -> None:
    platform = target_platform()
    if platform not in platforms:
        raise BertJaxError(
            f"attention_implementation {implementation!r} needs {needs}; this step runs on "
            f"{platform}: use attention_implementation 'xla' there"
        )
