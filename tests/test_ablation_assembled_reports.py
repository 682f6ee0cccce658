"""Every committed report assembled from units (`bert-jax ablate --assemble`) is what the
committed units give on a fresh clone: the same json, but for the commit and machine that
rendered it."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "experiments" / "ablations" / "results"


def _sizes(doc: dict) -> str:
    """Table 6's `--sizes` (its arms, those left out included, smallest first: the order they
    were given in); "" for any other table."""
    if doc["table"] != "6":
        return ""
    from bert_jax.ablations.tables.table6 import stack_size

    names = [*doc["arms"], *doc["assembled_from_units"].get("arms_left_out", [])]
    dims = (re.findall(r"\d+", name) for name in sorted(names, key=stack_size))
    return ",".join("L{}-H{}-A{}".format(*d) for d in dims)


@pytest.mark.slow  # builds the suite and vocab once for every report: about a minute on one core
def test_committed_assembled_reports_come_back_from_the_committed_units(tmp_path):
    """Reports whose scales differ only in what runs are keyed by (steps, seeds, sizes) share
    a workdir, as a researcher assembling them would: the suite and vocab are built once."""
    from bert_jax.ablations import report
    from bert_jax.ablations.run import ablate, scale_for
    from bert_jax.ablations.workdir import shared_settings

    paths = [p for p in sorted(ROOT.glob("*.json"))
             if "assembled_from_units" in json.loads(p.read_text())]  # fmt: skip
    assert paths, "no committed report assembled from units"
    # A calibration written into a workdir adds its ceiling to every later table there; the
    # other reports were assembled without one, so calibrations are assembled last.
    paths.sort(key=lambda p: p.name.startswith("calibration"))
    workdirs: dict[str, pathlib.Path] = {}  # the settings a workdir records -> the workdir
    for path in paths:
        doc = json.loads(path.read_text())
        made = doc["provenance"]
        scale = scale_for(doc["scale"], steps=made["steps"], model=made["model"],
                          seeds=made["seeds"], sizes=_sizes(doc))  # fmt: skip
        shared = json.dumps(shared_settings(scale), sort_keys=True, default=str)
        workdir = workdirs.setdefault(shared, tmp_path / f"workdir{len(workdirs)}")
        tasks = tuple(dict.fromkeys(t for row in doc["arms"].values() for t in row))
        for earlier in workdir.glob(f"{doc['table']}.*"):  # this table's report for other
            earlier.unlink()  # columns (calibration's conll, then squad): moved away, as asked
        again = ablate(doc["table"], scale, str(workdir), progress=lambda m: None,
                       only_tasks=tasks if doc.get("tasks_left_out") else (),
                       units_dir=str(ROOT / "units"), assemble=True)  # fmt: skip
        again = json.loads(json.dumps(report.json_safe(again)))
        for d in (doc, again):
            d["provenance"].pop("rendered_by")
        assert again == doc, path.name
