"""experiments/ablations/unit_contrast.py on the committed units: every run's per-example rows
give back the entity F1 its own evaluation recorded, and the contrast groups runs by their
pretraining seed (a unit KEY-pN is seed N)."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import pytest

from bert_jax.ablations.stats import headline, metric_of

SCRIPT = pathlib.Path(__file__).parents[1] / "experiments" / "ablations" / "unit_contrast.py"
_spec = importlib.util.spec_from_file_location("unit_contrast", SCRIPT)
unit_contrast = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(unit_contrast)
MLM = "mlm-L2-H128-A2-80.10.10-s10000"


def test_committed_units_rows_give_their_recorded_f1():
    runs, groups = unit_contrast.arm_runs(unit_contrast.UNITS, MLM, "conll")
    units = [u.name for u in unit_contrast.UNITS.iterdir() if u.name.startswith(MLM)]
    seeds = sorted(int(u.rpartition("-p")[2]) if "-p" in u else 0 for u in units)
    assert len(seeds) >= 2 and groups == sorted(groups) and sorted(set(groups)) == seeds
    assert all(groups.count(s) == 2 for s in seeds)  # its two fine-tuning seeds
    recorded = sorted(unit_contrast.UNITS.glob(f"{MLM}*/finetune/{MLM}*/conll/e*/seed*/"
                                               "eval_results.json"))  # fmt: skip
    recorded = [p for p in recorded if "@" not in str(p)]  # Figure 5's earlier checkpoints
    recorded.sort(key=lambda p: int(p.parts[-7].rpartition("-p")[2] if "-p" in p.parts[-7]
                                    else 0))  # by pretraining seed, as arm_runs orders them
    assert len(recorded) == len(runs)
    for rows, path in zip(runs, recorded, strict=True):
        f1 = headline(metric_of("conll"), rows.sum(0), len(rows))
        assert f1 == pytest.approx(100 * json.loads(path.read_text())["f1"], abs=1e-6), path


def _unit(root, name: str, seed: int, **manifest) -> None:
    d = root / name / "finetune" / name / "conll" / "e30-lr0.0003-d0.1-s64" / "seed0"
    d.mkdir(parents=True)
    np.savez(d / "example_rows.npz", rows=np.ones((3, 3)))
    fields = {"scale": "cpu", "suite_version": 3, "settings_sha256": "s", "text_sha256": "t",
              "suite_sha256": "u", "pretraining_seed": seed, **manifest}  # fmt: skip
    (root / name / "manifest.json").write_text(json.dumps(fields))


def test_a_unit_with_two_budgets_is_refused(tmp_path):
    _unit(tmp_path, "x-s10", 0)
    d = tmp_path / "x-s10" / "finetune" / "x-s10" / "conll" / "e30-lr0.0001-d0.1-s64" / "seed0"
    d.mkdir(parents=True)
    with pytest.raises(SystemExit, match="x-s10: 2 fine-tuning budgets of conll"):
        unit_contrast.arm_runs(tmp_path, "x-s10", "conll")


def test_units_made_from_other_data_are_refused_by_name(tmp_path):
    _unit(tmp_path, "x-s10", 0)
    _unit(tmp_path, "x-s10-p1", 1)
    _unit(tmp_path, "y-s10", 0, suite_sha256="other", text_sha256="other")
    assert unit_contrast.arm_runs(tmp_path, "x-s10", "conll")[1] == [0, 1]
    unit_contrast.check_shared(tmp_path, ["x-s10"])
    with pytest.raises(SystemExit, match=r"y-s10: made with another text_sha256, suite_sha256 "
                       r"than x-s10"):  # fmt: skip
        unit_contrast.check_shared(tmp_path, ["x-s10", "y-s10"])
