"""Fault matrix, `bert-jax ablate` (issue 32): every input that can be checked (--task data,
--corpus, --model) is refused before any pretraining and before the workdir's settings.json
records it, so the corrected command runs; a `--quick` table says it is a wiring check instead
of scoring the paper's claims. Nothing here trains: the sweep runs against a stand-in harness
(tests/test_ablate_quick_run.py runs a real quick sweep)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from etils import epath

from bert_jax.ablations import run, run_time
from bert_jax.ablations.harness import Harness
from bert_jax.ablations.run import scale_for
from bert_jax.errors import BertJaxError


def _sst2(directory) -> str:
    """A GLUE SST-2 directory in the layout `bert-jax finetune` reads."""
    directory.mkdir(parents=True)
    rows = ["sentence\tlabel", *(f"a {'good' if i % 2 else 'bad'} film {i}\t{i % 2}"
                                 for i in range(8))]  # fmt: skip
    for split in ("train", "dev"):
        (directory / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    return str(directory)


def test_task_typo_is_refused_before_pretraining_and_not_recorded(tmp_path):
    """Was: the typo surfaced when the first arm fine-tuned (after its pretraining), and
    settings.json had recorded it, so the corrected command was refused."""
    scale = scale_for("cpu", quick=True)
    good = _sst2(tmp_path / "sst2")
    for tasks, message in (
        ({"sst2": str(tmp_path / "sts2")}, r"--task=sst2:\S+sts2: no such directory"),
        ({"sst2": str(tmp_path)}, r"--task=sst2:\S+: \S+train\.tsv: no such file"),
        ({"conll": good}, r"--task=conll:\S+: \S+train\.txt: no such file"),
        ({"squad": good}, r"--task=squad:\S+: \S+train-v1\.1\.json: no such file"),
    ):
        with pytest.raises(BertJaxError, match=message):
            Harness(str(tmp_path / "wd"), scale, "", tasks, progress=print)
        assert not (tmp_path / "wd" / "settings.json").exists()
    Harness(str(tmp_path / "wd"), scale, "", {"sst2": good}, progress=print)  # the fix runs
    assert json.loads((tmp_path / "wd" / "settings.json").read_text())["tasks"] == {"sst2": good}


def test_corpus_and_model_refused_before_any_arm_starts(tmp_path):
    scale = scale_for("cpu", quick=True)
    few = tmp_path / "few.txt"
    few.write_text("One sentence.\nAnother one.\n\nA second document.\nIts end.\n")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Caf\xe9 au lait.\nEncore.\n".encode("latin-1"))
    for corpus, message in (
        (str(tmp_path / "nothing" / "*.txt"), r"--corpus: \S+\*\.txt: no file matches"),
        (str(tmp_path), r"--corpus: \S+: is a directory, expected text files"),
        (str(few), "2 documents; need at least 20"),
        (str(latin1), r"--corpus \S+latin1\.txt: not UTF-8 \(byte 3\)"),
    ):
        with pytest.raises(BertJaxError, match=message):
            Harness(str(tmp_path / "wd"), scale, corpus, {}, progress=print)
        assert not (tmp_path / "wd" / "settings.json").exists()
    with pytest.raises(BertJaxError, match="--model=L2-H0: unknown model preset"):
        scale_for("cpu", quick=True, model="L2-H0")


class _StandIn:
    """The harness's interface with fixed scores, as a sweep whose every arm sits at the
    majority class would give."""

    def __init__(self, *args, **kw) -> None:
        pass

    def busy(self, arm, task, seed):
        return None

    def finetune(self, arm, task, seed) -> float:
        return 50.0

    def intrinsic(self, arm, task) -> float:
        return 50.0

    def learning_rate(self, arm, task) -> float:
        return 1e-4

    def task_dir(self, kind) -> str:
        return kind

    def finetune_seq(self, arm, task) -> int:
        return 64

    def masked_lm_check(self, run_) -> dict | None:  # each pretraining run its own accuracy
        if not run_.steps:
            return None
        return {"mlm_accuracy": 0.3 + run_.seed / 100, "unigram": 0.05, "context_free": 0.13}

    def job_runs(self, arm, task, seed):  # no runs on disk: every one untimed
        directory = epath.Path("/nonexistent") / arm.name / task / str(seed)
        yield run_time.Ref("finetuning", task, directory, True)

    def to_do(self, jobs) -> None:
        return None

    def provenance(self, run_dirs) -> None:  # no workdir to digest
        return None

    def example_rows(self, arm, task, seed):  # every arm right on the same half: no difference
        if task.startswith("conll"):  # [tp, predicted, gold] entities per sentence
            return np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 1.0]] * 10)
        return np.array([[1.0], [0.0]] * 10)

    def baselines(self, kind) -> dict:
        return {"majority": 50.0, "best_constant": 50.0, "constant_answer": "0"}

    def constant_rows(self, kind, answer):  # right on the first 5 examples of the arms' 10
        if kind.startswith("conll"):
            return np.array([[1.0, 1.0, 1.0]] * 5 + [[0.0, 1.0, 1.0]] * 15)
        return np.array([[1.0]] * 5 + [[0.0]] * 15)


@pytest.mark.parametrize("quick", [True, False])
def test_quick_table_is_a_wiring_check_not_a_score_of_claims(tmp_path, monkeypatch, quick):
    """Was: "1 of the paper's 20 claims checked hold here" from a --quick sweep."""
    monkeypatch.setattr(run, "Harness", _StandIn)
    monkeypatch.setattr(run, "_share_compiled_steps", lambda workdir: None)
    messages: list[str] = []
    doc = run.ablate("5", scale_for("cpu", quick=quick), str(tmp_path), progress=messages.append)
    md = (tmp_path / "5.md").read_text()
    if quick:
        assert doc["wiring_check"] and doc["claims"] == []
        assert "a wiring check (--quick)" in messages[-1] and "claims checked" not in messages[-1]
        assert "This is a wiring check (--quick)" in md and "claims at this scale" not in md
    else:  # a real sweep is read against the paper's claims as before
        assert not doc["wiring_check"] and doc["claims"]
        n = len(doc["claims"])  # equal arms: no difference is resolved
        assert messages[-1].endswith(f"of the paper's {n} claims checked here, {n} unresolved "
                                     "at this scale")  # fmt: skip
        assert all(c["verdict"] == "unresolved at this scale" for c in doc["claims"])
        assert "wiring check" not in md
        # every pretraining run is read against its bar, the second seed's too
        assert doc["pretraining"]["BERT, pretraining seed 1"]["mlm_accuracy"] == 0.31
        assert "| BERT, pretraining seed 1 | 0.3100 |" in md and "| BERT | 0.3000 |" in md
    # every arm is set against the best constant, example by example (50 vs 25 accuracy)
    against = doc["intervals"]["sst2"]["BERT - best constant"]
    assert against["diff"] == pytest.approx(25.0) and against["low"] < 25.0 < against["high"]
    assert "Each arm minus the best constant" in md
    # --quick has one run per arm: no spread to measure, so no interval is printed
    assert ("| BERT | +25.00 (one run: no interval) |" if quick else "| BERT | +25.00 [") in md


def test_the_command_line_reaches_each_scale_field():
    """`bert-jax ablate` passes its flags to scale_for in this order (commands/ablate.py)."""
    s = scale_for("host", 50, "L2-H128-A2", 4, False, 2.0, 3e-4, "L1-H64-A2", pretrain_seeds=3)
    assert (s.steps, s.model, s.seeds, s.finetune_epochs, s.finetune_lr) == (
        50, "L2-H128-A2", 4, 2.0, 3e-4
    )
    assert s.sizes == ((1, 64, 2),) and s.pretrain_seeds == 3 and s.dtype == "bfloat16"
    with pytest.raises(BertJaxError, match="--pretrain_seeds=-1: must be positive"):
        scale_for("cpu", pretrain_seeds=-1)


def _stand_in_sweep(monkeypatch, workdir, table: str = "5", only_tasks=()) -> dict:
    monkeypatch.setattr(run, "Harness", _StandIn)
    monkeypatch.setattr(run, "_share_compiled_steps", lambda workdir: None)
    workdir.mkdir(exist_ok=True)
    return run.ablate(table, scale_for("cpu"), str(workdir), progress=print, only_tasks=only_tasks)


def test_rerender_refuses_rows_that_are_not_the_tables(tmp_path, monkeypatch):
    """Was: rc 0, the finished table rewritten from another table's rows.npz found beside it.
    The rows carry the table, scale, arms and tasks and a digest of the scores they were
    written with; rows of another table, of other tasks or of another run are refused by name,
    and the json and md are left as they were."""
    from bert_jax.ablations import report
    from bert_jax.ablations.evidence import Evidence

    _stand_in_sweep(monkeypatch, tmp_path / "a")
    _stand_in_sweep(monkeypatch, tmp_path / "fig5", "fig5")
    _stand_in_sweep(monkeypatch, tmp_path / "sst2", only_tasks=("sst2",))
    doc, rows = tmp_path / "a" / "5.json", tmp_path / "a" / "5.rows.npz"
    own = rows.read_bytes()
    written = {p: p.read_bytes() for p in (doc, tmp_path / "a" / "5.md")}
    report.rerender(str(doc))  # its own rows: rewritten, the same
    assert {p: p.read_bytes() for p in written} == written
    for source, why in (
        (tmp_path / "fig5" / "fig5.rows.npz", "the rows of table fig5 .cpu scale., not of table 5"),
        (tmp_path / "sst2" / "5.rows.npz", r"table 5's rows of sst2, not of sst2, mrpc, conll"),
    ):
        rows.write_bytes(source.read_bytes())
        with pytest.raises(BertJaxError, match=rf"^{rows}: {why}.*: put the 5.rows.npz written "):
            report.rerender(str(doc))
        assert {p: p.read_bytes() for p in written} == written
    # Another run of the same table and tasks (other scores): refused by the scores' digest.
    rows.write_bytes(own)
    evidence = Evidence.load(rows)
    evidence.identity["arms_sha256"] = "0" * 64
    evidence.save(rows)
    with pytest.raises(BertJaxError, match=rf"^{rows}: the rows of another run of table 5"):
        report.rerender(str(doc))
    # Rows written before they carried their identity are judged by what they hold.
    evidence.identity = None
    evidence.save(rows)
    report.rerender(str(doc))
    assert {p: p.read_bytes() for p in written} == written
    for old in (Evidence.load(tmp_path / "fig5" / "fig5.rows.npz"),
                Evidence.load(tmp_path / "sst2" / "5.rows.npz")):  # fmt: skip
        old.identity = None
        old.save(rows)
        with pytest.raises(BertJaxError, match=rf"^{rows}: rows .*not {doc}'s"):
            report.rerender(str(doc))


def test_committed_rows_without_identity_rerender_byte_identically(tmp_path):
    """The calibration report in results/ was saved before rows carried their identity: its
    rerender reproduces its json exactly."""
    from bert_jax.ablations import report

    results = pathlib.Path(__file__).parents[1] / "experiments" / "ablations" / "results"
    for name in ("calibration_cpu_2026-11-28.json", "calibration_cpu_2026-11-28.rows.npz"):
        (tmp_path / name).write_bytes((results / name).read_bytes())
    report.rerender(str(tmp_path / "calibration_cpu_2026-11-28.json"))
    assert (tmp_path / "calibration_cpu_2026-11-28.json").read_bytes() == (
        results / "calibration_cpu_2026-11-28.json"
    ).read_bytes()


def test_only_tasks_never_replaces_a_table_with_other_columns(tmp_path, monkeypatch):
    """Was: `--only_tasks mrpc` on a workdir whose table was rendered `--only_tasks sst2`
    replaced its json, md and rows with an mrpc-only table. A render that would leave out
    columns of the table on disk is refused before any run, naming them and the fix, which
    renders both (their runs reused)."""
    ran: list = []

    class Counting(_StandIn):
        def finetune(self, arm, task, seed) -> float:
            ran.append(task)
            return 50.0

    _stand_in_sweep(monkeypatch, tmp_path, only_tasks=("sst2",))
    written = {p: p.read_bytes() for p in tmp_path.glob("5.*")}
    assert set(written) == {tmp_path / n for n in ("5.json", "5.md", "5.rows.npz")}
    monkeypatch.setattr(run, "Harness", Counting)
    for only in (("mrpc",), ("squad", "conll")):
        want = (rf"^--only_tasks={','.join(only)}: {tmp_path / '5.json'} holds table 5's sst2 "
                rf"too, which this render leaves out: add it \(--only_tasks=sst2,")  # fmt: skip
        with pytest.raises(BertJaxError, match=want):
            run.ablate("5", scale_for("cpu"), str(tmp_path), progress=print, only_tasks=only)
        assert not ran and {p: p.read_bytes() for p in written} == written
    doc = run.ablate("5", scale_for("cpu"), str(tmp_path), progress=print,
                     only_tasks=("sst2", "mrpc"))  # the fix the error names  # fmt: skip
    assert {t for row in doc["arms"].values() for t in row} == {"sst2", "mrpc"}
    # The full table covers every column; a partial render over it is refused the same way.
    run.ablate("5", scale_for("cpu"), str(tmp_path), progress=print)
    with pytest.raises(BertJaxError, match=r"5's sst2, mrpc, squad too, .* \(drop --only_tasks;"):
        run.ablate("5", scale_for("cpu"), str(tmp_path), progress=print, only_tasks=("conll",))


def test_only_tasks_without_the_plotted_column_renders_the_table(tmp_path, monkeypatch):
    """Was: `ablate --table 6 --only_tasks sst2` trained every run, wrote 6.json, then died
    with a KeyError traceback (rc 1) drawing 6.png, whose perplexity column it had left out."""
    doc = _stand_in_sweep(monkeypatch, tmp_path, "6", only_tasks=("sst2",))
    assert doc["tasks_left_out"] == ["mlm_ppl", "mrpc", "conll"]
    assert (tmp_path / "6.png").stat().st_size > 0 and (tmp_path / "6.md").exists()
