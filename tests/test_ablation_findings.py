"""The ablations README's findings table is generated from the committed reports and current."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import shutil

ROOT = pathlib.Path(__file__).resolve().parent.parent / "experiments" / "ablations"


def _findings():
    spec = importlib.util.spec_from_file_location("findings", ROOT / "findings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_findings_table_is_generated_from_the_newest_reports(tmp_path):
    findings = _findings()
    readme = (ROOT / "README.md").read_text()
    stale = "stale: run python experiments/ablations/findings.py"
    assert findings.render(readme, ROOT / "results") == readme, stale
    newest = [p.name for p in findings.newest_reports(ROOT / "results")]
    assert "table5_cpu_2026-11-28.json" in newest and "table5_cpu_2026-11-27.json" not in newest
    # A newer report of a table replaces its rows; a claim's verdict is the report's own.
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results", results)
    doc = json.loads((results / "table5_cpu_2026-11-28.json").read_text())
    doc["claims"] = [{**doc["claims"][0], "verdict": "reversed", "detail": "made up | here"}]
    (results / "table5_cpu_2099-01-01.json").write_text(json.dumps(doc))
    table = "\n".join(findings.rows(results))
    assert "table5_cpu_2026-11-28" not in table
    assert f"| {doc['claims'][0]['claim']} | made up / here | reversed |" in table
