"""Ahead-of-time TPU compiles for tests that check what compiles and whether it fits, not how
much memory it needs to the byte: XLA's least execution-time optimisation effort. Measured
2026-11-27 on the 2-core machine: the AOT and distillation compile tests took 125 s instead of
181 s. The memory XLA then reports is higher (the ablation plan's L1-H64 step: 0.11 GiB instead
of 0.013), so a test that compares a fit with a committed table compiles at the default."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax


@contextlib.contextmanager
def least_effort() -> Iterator[None]:
    previous = jax.config.jax_exec_time_optimization_effort
    jax.config.update("jax_exec_time_optimization_effort", -1.0)
    try:
        yield
    finally:
        jax.config.update("jax_exec_time_optimization_effort", previous)
