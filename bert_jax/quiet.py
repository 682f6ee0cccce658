"""What a CPU user of the CLI does not need to see: libtpu probing for TPUs that are not there
(its "Failed to find host bounds" / TPU_WORKER_HOSTNAMES messages, its lockfile shared between
JAX processes) and the INFO/WARNING chatter of Orbax and JAX. Applied by `bert_jax.cli`:
`cpu_only_platform` before JAX loads, `quiet_logs` once absl has parsed the flags."""

from __future__ import annotations

import glob
import os
import pathlib

# Subcommands that use libtpu without a TPU: its compile-only devices (ahead-of-time fit checks).
NEEDS_LIBTPU = ("compile",)
_GOOGLE_PCI_VENDOR = "0x1ae0"  # TPUs are PCI devices of this vendor (what JAX itself checks)
# Device nodes of attached accelerators: TPU VMs (/dev/accel*, /dev/vfio/N), NVIDIA and AMD GPUs.
_ACCELERATOR_NODES = ("/dev/accel*", "/dev/vfio/[0-9]*", "/dev/nvidia[0-9]*", "/dev/nvidiactl",
                      "/dev/dxg", "/dev/kfd")  # fmt: skip


def accelerator_attached() -> bool:
    """A TPU (any Google PCI device, or a TPU device node) or a GPU is visible, so JAX must look
    for it. Checked without importing JAX."""
    for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            if pathlib.Path(vendor).read_text().strip() == _GOOGLE_PCI_VENDOR:
                return True
        except OSError:
            continue
    return any(glob.glob(pattern) for pattern in _ACCELERATOR_NODES)


def cpu_only_platform(subcommand: str, args: list[str]) -> str | None:
    """Sets JAX_PLATFORMS=cpu when no accelerator is attached, no platform was chosen and the
    subcommand does not compile for TPUs; returns the value set (None: left alone)."""
    if "JAX_PLATFORMS" in os.environ or subcommand in NEEDS_LIBTPU:
        return None
    if subcommand == "ablate" and any("tpu" in a for a in args):  # --scale=tpu compiles for TPUs
        return None
    if accelerator_attached():
        return None
    os.environ["JAX_PLATFORMS"] = "cpu"
    return "cpu"


def wants_verbosity(args: list[str]) -> bool:
    """The user chose absl's log level (--verbosity=N, -v N, --v=N)."""
    return any(a.split("=")[0] in ("--verbosity", "-verbosity", "--v", "-v") for a in args)


def _not_orbax_chatter(record) -> bool:
    """Orbax warns on every read-only restore ("Given directory is read only"); its errors stay
    (bert_jax.save_noise decides about those)."""
    return "/orbax/" not in record.pathname or record.levelno >= 40


def quiet_logs(args: list[str]) -> None:
    """absl logging at WARNING without Orbax's warnings, and TensorFlow/XLA C++ logs at errors,
    unless the user chose a verbosity."""
    if wants_verbosity(args):
        return
    from absl import logging

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    logging.set_verbosity(logging.WARNING)  # Orbax and JAX log every step at INFO
    logging.get_absl_handler().addFilter(_not_orbax_chatter)
