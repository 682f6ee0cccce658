"""A finished run brought in from a unit replaces the records of the same run left unfinished in
the workdir (a carried run continued there, then finished on another machine), and never those
of a run the workdir finished itself."""

from __future__ import annotations

import json

from etils import epath

from bert_jax.ablations.units import _copy_run


def _run(root: epath.Path, seconds: float, done: bool) -> epath.Path:
    run = root / "pretrain" / "mlm-L2-H128-A2-80.10.10-s10"
    run.mkdir(parents=True, exist_ok=True)
    (run / "run_time.json").write_text(json.dumps({"seconds": seconds}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": int(seconds)}) + "\n")
    if done:
        (run / "done.json").write_text("{}")
    return run


def test_a_finished_run_replaces_an_unfinished_copy_and_keeps_a_finished_one(tmp_path):
    unit, workdir = epath.Path(tmp_path / "unit"), epath.Path(tmp_path / "workdir")
    finished = _run(unit, 9.0, done=True)
    stale = _run(workdir, 4.0, done=False)  # a carry's records, up to its checkpoint
    assert _copy_run(unit, finished, workdir) == 3
    assert json.loads((stale / "run_time.json").read_text()) == {"seconds": 9.0}
    assert (stale / "metrics.jsonl").read_text() == (finished / "metrics.jsonl").read_text()
    assert (stale / "done.json").exists()
    _run(workdir, 7.0, done=True)  # the workdir's own finished run: kept as it is
    assert _copy_run(unit, finished, workdir) == 0
    assert json.loads((stale / "run_time.json").read_text()) == {"seconds": 7.0}
