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


def test_a_claim_measured_again_is_shown_from_the_newer_report_only(tmp_path):
    """A table assembled from units for some columns (another series of the same table and
    scale) replaces the older report's rows of the claims it makes, and no others."""
    findings = _findings()
    results = tmp_path / "results"
    results.mkdir()
    old = json.loads((ROOT / "results" / "table5_cpu_2026-11-28.json").read_text())
    (results / "table5_cpu_2026-11-28.json").write_text(json.dumps(old))
    again = next(c for c in old["claims"] if c["claim"].startswith("MLM (No NSP) beats LTR"))
    newer = {**old, "claims": [{**again, "detail": "from units"}]}
    (results / "table5_cpu_2099-01-01_units_conll.json").write_text(json.dumps(newer))
    table = findings.rows(results)
    made = [line for line in table if f"| {again['claim']} |" in line]
    assert len(made) == 1 and "table5_cpu_2099-01-01_units_conll" in made[0], made
    assert len(table) == 2 + len(old["claims"])  # the old report's other claims stay
    # The same claim judged against the best constant (random init below it) replaces it too.
    floor = "No NSP beats random init on conll"
    assert any(c["claim"] == floor for c in old["claims"])
    judged = {**again, "claim": f"{floor} (and the best constant answer, 17.56, which random "
              "init scores below)", "detail": "against the constant"}  # fmt: skip
    newer["claims"].append(judged)
    (results / "table5_cpu_2099-01-01_units_conll.json").write_text(json.dumps(newer))
    table = findings.rows(results)
    assert [line for line in table if f"| {floor}" in line] == [
        line for line in table if "against the constant" in line] and len(table) == 2 + len(
        old["claims"])  # fmt: skip


def test_every_committed_report_with_rows_rerenders_byte_for_byte(tmp_path):
    """`bert-jax ablate --rerender` of a committed report (its rows beside it) on a fresh clone
    writes the same json and md."""
    from bert_jax.ablations import report

    with_rows = sorted(p.with_name(p.name.replace(".rows.npz", ".json"))
                       for p in (ROOT / "results").glob("*.rows.npz"))  # fmt: skip
    assert len(with_rows) >= 2, with_rows
    for path in with_rows:
        for name in (path.name, path.name.replace(".json", ".md"),
                     path.name.replace(".json", ".rows.npz")):  # fmt: skip
            shutil.copy(path.with_name(name), tmp_path / name)
        report.rerender(str(tmp_path / path.name))
        for suffix in (".json", ".md"):
            name = path.name.replace(".json", suffix)
            assert (tmp_path / name).read_bytes() == path.with_name(name).read_bytes(), name


def test_claims_name_the_means_their_interval_subtracts():
    """An interval-judged claim opens with the arms' means over their pretraining runs (the
    mean of the runs' means the assembly lists), whose difference is the interval's; the
    header names the epochs its task trained (conll: 30, not the default 3)."""
    path = ROOT / "results" / "table5_cpu_2026-11-30_units_conll.json"
    doc = json.loads(path.read_text())
    run_means = doc["assembled_from_units"]["run_means"]
    d = doc["intervals"]["conll"]["No NSP - LTR & No NSP"]
    assert abs(d["means"][0] - d["means"][1] - d["diff"]) < 1e-9
    for arm, mean in zip(("No NSP", "LTR & No NSP"), d["means"], strict=True):
        runs = run_means[arm]["conll"]
        assert abs(sum(runs) / len(runs) - mean) < 1e-9, arm
    claim = next(c for c in doc["claims"] if c["claim"].startswith("MLM (No NSP) beats LTR"))
    assert claim["detail"].startswith(f"means {d['means'][0]:.2f} vs {d['means'][1]:.2f}: ")
    md = path.with_suffix(".md").read_text()
    assert "fine-tuned 30 epochs at each arm's" in md


def test_a_claim_read_at_several_designs_shows_its_verdict_over_them(tmp_path):
    """aa_looks.py recomputes a claim at each design its sweep read (from the report's rows),
    refuses looks that do not end at the report's design, and findings.py shows the verdict
    over the looks beside the one-reading one, and refuses it once the report moves on."""
    import subprocess
    import sys

    findings = _findings()
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results", results, ignore=shutil.ignore_patterns("aa_looks_*"))
    report_path = results / "table5_cpu_2026-11-30_units_conll.json"
    claim = "MLM (No NSP) beats LTR & No NSP on conll"
    out = results / "aa_looks_test_2026-11-30.json"

    def looks(*designs: str, arms: tuple[str, ...] = ("--claim", claim, "--b", "LTR & No NSP"),
              out: pathlib.Path = out) -> subprocess.CompletedProcess:  # fmt: skip
        return subprocess.run(
            [sys.executable, str(ROOT / "aa_looks.py"), "--report", str(report_path), "--a",
             "No NSP", *arms, "--task", "conll", *designs, "--sims", "20", "--examples", "200",
             "--out", str(out)],
            capture_output=True, text=True, timeout=300)  # fmt: skip

    short = looks("--looks", "2/2,3/3")
    assert short.returncode != 0 and "is not the last look's" in short.stderr, short.stderr
    report = json.loads(report_path.read_text())
    g_a, g_b = report["intervals"]["conll"]["No NSP - LTR & No NSP"]["units"]
    judged = next(c for c in report["claims"] if c["claim"] == claim)
    low, high = judged["interval"]
    done = looks("--looks", f"2/2,3/3,{g_a}/{g_b}", "--planned", f"{g_a + 2}/{g_b}")
    assert done.returncode == 0, done.stderr[-2000:]
    for look in ("3:3  +8.44 [-9.74, +26.63]", f"{g_a}:{g_b}  ", f"[{low:+.2f}, {high:+.2f}]"):
        assert look in done.stdout, done.stdout
    doc = json.loads(out.read_text())
    row = next(line for line in findings.rows(results) if f"| {claim} |" in line)
    said = (f"| {judged['verdict']} at one reading; over the 3 designs read as seeds were added "
            f"and 1 planned, {doc['verdict_over_looks']} (p {doc['observed'][-1]['p']:.3f}")
    assert said in row, row
    # A contrast the table claims nothing about (no --claim): the report's interval, read the
    # other way round ("BERT - No NSP" as No NSP - BERT); the findings table does not show it.
    bert = report["intervals"]["conll"]["BERT - No NSP"]
    g_b, g_a = bert["units"]
    contrast_out = results / "aa_looks_contrast_2026-11-30.json"
    contrast = looks("--looks", f"{g_a}/{g_b}", arms=("--b", "BERT"), out=contrast_out)
    assert contrast.returncode == 0, contrast.stderr[-2000:]
    assert f"[{-bert['high']:+.2f}, {-bert['low']:+.2f}]" in contrast.stdout, contrast.stdout
    assert json.loads(contrast_out.read_text())["claim"] == "No NSP - BERT on conll"
    assert not any("No NSP - BERT" in line for line in findings.rows(results))
    moved = json.loads(report_path.read_text())
    next(c for c in moved["claims"] if c["claim"] == claim)["interval"] = [0.5, 9.0]
    report_path.write_text(json.dumps(moved))
    try:
        findings.rows(results)
    except SystemExit as e:
        assert "aa_looks_test_2026-11-30.json" in str(e) and "--looks" in str(e)
    else:
        raise AssertionError("a stale verdict over the looks was shown")
