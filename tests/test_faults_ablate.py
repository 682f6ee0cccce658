"""Fault matrix, `bert-jax ablate` (issue 32): every input that can be checked (--task data,
--corpus, --model) is refused before any pretraining and before the workdir's settings.json
records it, so the corrected command runs; a `--quick` table says it is a wiring check instead
of scoring the paper's claims. Nothing here trains: the sweep runs against a stand-in harness
(tests/test_ablate_quick_run.py runs a real quick sweep)."""

from __future__ import annotations

import json

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
        (str(tmp_path / "nothing" / "*.txt"), r"--corpus \S+\*\.txt: no files match"),
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
    assert "Each arm minus the best constant" in md and "| BERT | +25.00 [" in md


def test_the_command_line_reaches_each_scale_field():
    """`bert-jax ablate` passes its flags to scale_for in this order (commands/ablate.py)."""
    s = scale_for("host", 50, "L2-H128-A2", 4, False, 2.0, 3e-4, "L1-H64-A2", pretrain_seeds=3)
    assert (s.steps, s.model, s.seeds, s.finetune_epochs, s.finetune_lr) == (
        50, "L2-H128-A2", 4, 2.0, 3e-4
    )
    assert s.sizes == ((1, 64, 2),) and s.pretrain_seeds == 3 and s.dtype == "bfloat16"
    with pytest.raises(BertJaxError, match="--pretrain_seeds=-1: must be positive"):
        scale_for("cpu", pretrain_seeds=-1)
