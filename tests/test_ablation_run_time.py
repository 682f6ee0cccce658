"""Run-time records of ablation runs (bert_jax.ablations.run_time): attempts add up, one
stopped by SIGTERM after saving counts, a failed one records nothing, and a table's sum counts
each run once."""

import itertools

import pytest
from etils import epath

from bert_jax.ablations import run_time
from bert_jax.errors import StoppedAndSaved


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
    with pytest.raises(StoppedAndSaved):  # its saved steps are continued: their time counts
        run_time.timed(tune, lambda: (_ for _ in ()).throw(StoppedAndSaved("SIGTERM")))
    run_time.timed(tune, lambda: None)
    assert run_time.seconds(pre) == 1800.0 and run_time.seconds(tune) == 1800.0
    spent = run_time.spent([("pretraining", pre), ("finetuning", tune), ("pretraining", pre),
                            ("choosing", old)])  # fmt: skip
    assert spent == {"pretraining_h": 0.5, "choosing_h": 0.0, "finetuning_h": 0.5, "runs": 3,
                     "untimed_runs": 1}  # fmt: skip


def test_what_is_left_is_estimated_from_finished_runs_of_its_kind(tmp_path):
    """A pretraining run's cost per step comes from the rate its log shows, not its record (a
    resumed run's record covers its last attempt only); a fine-tuning run's from its record."""
    root = epath.Path(tmp_path)
    resumed = root / "resumed"  # 1000 steps of 32 at 320 seq/s: 100 s, though 4 s recorded
    resumed.mkdir()
    (resumed / "config.json").write_text('{"global_batch_size": 32}')
    rates = (300.0, 320.0, 340.0, 20.0, 320.0)  # one window slowed by a neighbour: the median
    (resumed / "metrics.jsonl").write_text(
        "\n".join(f'{{"step": {i}, "seq_per_sec": {r}}}' for i, r in enumerate(rates))
        + '\n{"eval_loss": 2}'
    )
    (resumed / run_time.FILE).write_text('{"seconds": 4.0, "attempts": 1}')
    tunes = []
    for i, took in enumerate((100.0, 300.0, 200.0)):
        (d := root / f"tune{i}").mkdir()
        (d / run_time.FILE).write_text(f'{{"seconds": {took}, "attempts": 1}}')
        tunes.append(d)
    refs = [
        run_time.Ref("pretraining", "mlm L2", resumed, True),
        run_time.Ref("pretraining", "mlm L2", root / "half", False, 3600 * 10),  # 10 s/step
        run_time.Ref("pretraining", "mlm L2", root / "half", False, 3600 * 10),  # shared: once
        run_time.Ref("pretraining", "electra L2", root / "new", False, 1000),  # no finished one
        *(run_time.Ref("finetuning", "conll L2", d, True) for d in tunes),
        run_time.Ref("finetuning", "conll L2", None, False),  # its rate not chosen yet
        run_time.Ref("finetuning", "conll L2", root / "t4", False),
        run_time.Ref("choosing", "conll L2", root / "c0", False),  # no choice finished
    ]
    left = run_time.remaining(refs)
    assert left["pretraining"] == {"runs": 2, "hours": pytest.approx(1.0), "unknown": 1}
    assert left["finetuning"] == {"runs": 2, "hours": pytest.approx(400 / 3600), "unknown": 0}
    assert left["choosing"] == {"runs": 1, "hours": 0.0, "unknown": 1}
    assert run_time.describe(left) == (
        "to do: 2 pretraining runs (about 1.0 h; 1 with none of their kind finished yet), "
        "1 rate-choice run (none of their kind finished yet), 2 fine-tuning runs (about 7 min); "
        "about 1.1 h of one process in all, not counting the 2 with none of their kind "
        "finished, by this workdir's finished runs of the same kind"
    )
    done = run_time.remaining(r._replace(done=True) for r in refs if r.directory is not None)
    assert run_time.describe(done) is None


def test_a_rate_choice_several_units_need_is_counted_under_the_first(tmp_path):
    """An arm's rate choice is made once, on its seed-0 run: in a plan it is counted under the
    first unit that needs it, and a later unit names that one instead of counting it again."""
    root = epath.Path(tmp_path)
    (done := root / "tune").mkdir()
    (done / run_time.FILE).write_text('{"seconds": 600.0, "attempts": 1}')
    finished = [run_time.Ref("choosing", "conll L2", done, True)]
    choice = [run_time.Ref("choosing", "conll L2", root / f"lr{i}", False) for i in range(3)]
    units = [(f"mlm-p{seed}", [f"BERT:{seed}"],
              [run_time.Ref("pretraining", "mlm L2", root / f"p{seed}", False), *choice,
               run_time.Ref("finetuning", "conll L2", None, False)]) for seed in (0, 1)]
    first, second = run_time.per_unit(units, finished)
    assert first["left"]["choosing"]["runs"] == 3 and first["shared_with"] == []
    assert second["left"]["choosing"]["runs"] == 0 and second["shared_with"] == ["BERT:0"]
    assert second["left"]["pretraining"]["runs"] == second["left"]["finetuning"]["runs"] == 1
    made = [(k, names, [r._replace(done=True) if r in choice else r for r in refs])
            for k, names, refs in units]  # the choice made: nothing left to point at
    assert [u["shared_with"] for u in run_time.per_unit(made, finished)] == [[], []]


def test_a_runs_kind_is_read_from_where_it_lives():
    """Fine-tuning and rate-choice runs of one model, task and budget are one kind whatever
    their rate, pretraining seed or Figure 5 step; another model, task or budget is another."""
    from bert_jax.ablations.layout import run_kind

    f = epath.Path("/w/finetune")
    runs = (
        "mlm-L2-H128-A2-80.10.10-s10000-p1/conll/e30-lr5e-05-d0.1-s64/seed0",
        "ltr-L2-H128-A2-80.10.10-s10000@2500/conll/e30-lr0.0003-d0.1-s64/seed2",
        "random-L2-H128-A2-mlm_nsp-p1/conll/choose-0.0003-5e-05-e30-d0.1-s64/lr5e-05",
    )
    same = {run_kind(f / run) for run in runs}
    assert same == {"L2-H128-A2 conll e30-d0.1-s64"}
    assert run_kind(f / "released-MiniLM-L6/squad+bilstm-h0.001/e3-lr0.0001-d0.1/seed1") == (
        "MiniLM-L6 squad+bilstm-h0.001 e3-d0.1"
    )
