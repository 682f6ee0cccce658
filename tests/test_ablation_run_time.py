"""Run-time records of ablation runs (bert_jax.ablations.run_time): attempts add up, a failed
attempt records nothing, and a table's sum counts each run once."""

import itertools

import pytest
from etils import epath

from bert_jax.ablations import run_time


def test_attempts_add_up_and_each_run_counts_once(tmp_path, monkeypatch):
    clock = itertools.count(step=900.0)  # each attempt "takes" 900 s
    monkeypatch.setattr(run_time.time, "monotonic", lambda: next(clock))
    pre, tune, old = (epath.Path(tmp_path) / n for n in ("pre", "tune", "old"))
    for d in (pre, tune, old):
        d.mkdir()
    assert run_time.timed(pre, lambda: "done") == "done"
    run_time.timed(pre, lambda: None)  # resumed after a stop: a second attempt
    with pytest.raises(RuntimeError):
        run_time.timed(tune, lambda: (_ for _ in ()).throw(RuntimeError("killed")))
    assert run_time.seconds(tune) is None  # a failed attempt records nothing
    run_time.timed(tune, lambda: None)
    assert run_time.seconds(pre) == 1800.0 and run_time.seconds(tune) == 900.0
    spent = run_time.spent([("pretraining", pre), ("finetuning", tune), ("pretraining", pre),
                            ("choosing", old)])  # fmt: skip
    assert spent == {"pretraining_h": 0.5, "choosing_h": 0.0, "finetuning_h": 0.25, "runs": 3,
                     "untimed_runs": 1}  # fmt: skip
