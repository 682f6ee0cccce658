"""experiments/bench/bench_data_at_scale.py end to end on a tiny corpus (fast runner only): its
table has a row per stage, and its numbers are present and agree with each other. No timings are
asserted (a benchmark, not a timed test)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from bert_jax.ablations.scales import SCALES

REPO = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = REPO / "experiments" / "bench" / "bench_data_at_scale.py"


def _table_rows(table: str) -> dict[str, list[str]]:
    """Markdown table body rows keyed by their stage cell."""
    rows = [line.strip("|").split("|") for line in table.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells] for cells in rows[1:]}


def test_bench_data_at_scale_tiny_corpus(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--mb", "0.2", "--runners", "local", "--out", str(out),
         "--tmp", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "results.json").read_text())
    meta, rows = result["meta"], result["rows"]
    assert meta["commit"] and meta["date"] and meta["cores"] >= 1
    assert meta["recipe"]["batch"] == SCALES["host"].batch  # read when the script ran
    write, read = rows
    assert (write["stage"], read["stage"]) == ("write local", "read")

    batch = meta["recipe"]["batch"]
    assert write["instances"] > batch  # a few batches from 0.2 MB at dupe_factor 5
    # One pass of the reader drops only the last partial batch.
    assert read["instances"] == write["instances"] - write["instances"] % batch
    assert read["instances"] == read["batches"] * batch
    assert read["instances_written"] == write["instances"]
    assert read["masked_tokens"] > read["instances"]  # dynamic masks were drawn
    for row in rows:
        assert 0.15 < row["text_mb"] <= 0.2
        assert row["wall_s"] > 0 and row["cpu_s"] >= 0 and row["peak_rss_mb"] > 0
        assert row["instances_per_s"] * row["wall_s"] == pytest.approx(row["instances"])
    assert write["output_mb"] > 0 and write["worker_rss_mb"] > 0  # 2 worker processes ran

    table = (out / "table.md").read_text()
    assert table.strip() in proc.stdout
    cells = _table_rows(table)
    assert set(cells) == {"write local", "read"}
    assert cells["write local"][2] == f"{write['instances']:,}"
    assert cells["read"][2] == f"{read['instances']:,}"
    assert f"commit {meta['commit']}" in table
