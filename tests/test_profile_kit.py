"""The GPU profile kit (experiments/bench/profile_step.py) runs on CPU, which is how it is
checked before a short lease: its variants are timed, its jax.profiler trace is parsed into the
step's most expensive kernels, and torch.profiler's top operations of transformers' step are
written beside them."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.slow  # three small compiles, a trace and transformers' step (~60 s)
def test_profile_kit_runs_on_cpu_and_writes_its_tables(tmp_path):
    out = tmp_path / "profile"
    proc = subprocess.run(
        [sys.executable, str(REPO / "experiments/bench/profile_step.py"), "--out", str(out),
         "--config", "mini", "--batch", "4", "--seq", "32", "--steps", "1", "--rounds", "1",
         "--only", "no dropout,gradients only"],
        capture_output=True, text=True, timeout=900, env=dict(os.environ, JAX_PLATFORMS="cpu"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["variants"]) == {"as trained", "no dropout", "gradients only"}
    assert all(v["s_per_step"] > 0 for v in summary["variants"].values())
    # Kernels come from the trace: HLO fusions of our step, each a share of the step.
    kernels = summary["jax_top20"]
    assert 0 < len(kernels) <= 20 and any("fusion" in name for name, _, _ in kernels)
    table = (out / "jax_top20.md").read_text()
    shares = [float(s) for s in re.findall(r"\| ([0-9.]+)% \|", table)]
    assert shares and max(shares) <= 100.0  # no wrapper counted over the kernels it runs
    torch_ops = [name for name, _, _ in summary["torch_top20"]]
    assert any(name.startswith("aten::") for name in torch_ops)
    assert (out / "torch_top20.md").exists() and list((out / "trace").rglob("*.json.gz"))
