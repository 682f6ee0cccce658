"""The XLA flag every test process compiles its CPU programs with: LLVM's optimisation level 1
instead of its default 2. The suite compiles hundreds of small programs and runs most of them
for a few steps, so code generation, not execution, is much of its time. Measured 2026-12-02 on
one core with empty caches: a tiny BERT's pretraining step compiled in 5.8 s instead of 8.8 s
and ran in 11.9 ms instead of 11.1 (the same loss); tests/test_ablate_quick_run.py took 222 s
instead of 257 s, and the run-bound tests/test_family_learning.py 133 s against 134 s. Level 0
compiled that step in 3.7 s but ran it in 47 ms. Set by conftest.py for the test processes and
given to the CLI processes that tests start with a clean environment."""

from __future__ import annotations

FLAGS = "--xla_backend_optimization_level=1"


def with_test_flags(xla_flags: str) -> str:
    """`xla_flags` (the environment's XLA_FLAGS) with the tests' level, unless it sets one."""
    if "--xla_backend_optimization_level" in xla_flags:
        return xla_flags
    return f"{xla_flags} {FLAGS}".strip()
