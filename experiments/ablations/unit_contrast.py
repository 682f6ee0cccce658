"""One arm against another from committed units alone, with the calibrated interval: for sweeps
still under way, before a table can be assembled (its other arms not yet run).

  python experiments/ablations/unit_contrast.py --a mlm-L2-H128-A2-80.10.10-s10000 \\
      --b ltr-L2-H128-A2-80.10.10-s10000 --task conll
  python experiments/ablations/unit_contrast.py --a ltr-L2-H128-A2-80.10.10-s10000 \\
      --a_task conll+bilstm-h0.001 --b ltr-L2-H128-A2-80.10.10-s10000 --task conll

An arm is a unit key; its pretraining seeds are the units `KEY` (seed 0) and `KEY-pN` under
--units (experiments/ablations/results/units/cpu). Each unit's fine-tuning runs of the task at
its final checkpoint (every seed directory of one budget; the unit must have exactly one) are
that pretraining run's runs, and bert_jax.ablations.interval.difference gives A - B: Welch's t
over the pretraining runs' means, with the dev examples' sampling added. Prints the per-run
scores and the interval (and, unresolved, about how many pretraining runs an arm would resolve
a difference of its size at the measured spreads); expect a second.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re

import numpy as np

from bert_jax.ablations import interval
from bert_jax.ablations.stats import headline, metric_of

UNITS = pathlib.Path(__file__).resolve().parent / "results" / "units" / "cpu"


# What units must share to be compared (bert_jax.ablations.provenance.shared, and the scale).
SHARED = ("scale", "suite_version", "settings_sha256", "text_sha256", "suite_sha256")


def units_of(units: pathlib.Path, key: str) -> dict[pathlib.Path, dict]:
    """The units of `key` (KEY and KEY-pN) and their manifests."""
    return {u: json.loads((u / "manifest.json").read_text()) for u in sorted(units.iterdir())
            if re.fullmatch(re.escape(key) + r"(-p\d+)?", u.name)}  # fmt: skip


def arm_runs(units: pathlib.Path, key: str, task: str) -> tuple[list[np.ndarray], list[int]]:
    """Every fine-tuning run of `task` on the final checkpoint of each pretraining seed of `key`
    (units KEY and KEY-pN), and each run's pretraining seed (from the unit's manifest)."""
    runs, groups = [], []
    by_seed = sorted(units_of(units, key).items(), key=lambda um: um[1]["pretraining_seed"])
    for unit, manifest in by_seed:
        budgets = sorted(p for p in (unit / "finetune" / unit.name / task).glob("e*") if p.is_dir())
        if len(budgets) != 1:
            raise SystemExit(f"{unit}: {len(budgets)} fine-tuning budgets of {task} "
                             f"({[b.name for b in budgets]}); expected one")  # fmt: skip
        for rows_file in sorted(budgets[0].glob("seed*/example_rows.npz")):
            runs.append(np.load(rows_file)["rows"])
            groups.append(manifest["pretraining_seed"])
    if not runs:
        raise SystemExit(f"{units}: no unit {key} (or {key}-pN) with {task} runs")
    return runs, groups


def check_shared(units: pathlib.Path, keys: list[str]) -> None:
    """Refuses, naming the unit and the fields, units of `keys` made with other settings,
    pretraining text or downstream data than the first (as Units._check does against a
    workdir)."""
    found = [um for k in keys for um in units_of(units, k).items()]
    (first_unit, first), *rest = found
    for unit, manifest in rest:
        differ = [k for k in SHARED if manifest.get(k) != first.get(k)]
        if differ:
            raise SystemExit(f"{unit}: made with another {', '.join(differ)} than "
                             f"{first_unit.name}; units compared must share them")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="unit key of arm A")
    ap.add_argument("--b", required=True, help="unit key of arm B")
    ap.add_argument("--task", required=True, help="fine-tuning task directory, e.g. conll")
    ap.add_argument("--a_task", default="", help="arm A's task directory (default --task)")
    ap.add_argument("--units", default=str(UNITS))
    args = ap.parse_args()
    units = pathlib.Path(args.units)
    kind = args.task.split("+")[0]
    metric = metric_of(kind)
    arms = {"A": (args.a, args.a_task or args.task), "B": (args.b, args.task)}
    loaded = {}
    for name, (key, task) in arms.items():
        runs, groups = arm_runs(units, key, task)
        loaded[name] = (runs, groups)
        by_seed: dict[int, list[float]] = {}
        for rows, g in zip(runs, groups, strict=True):
            by_seed.setdefault(g, []).append(headline(metric, rows.sum(0), len(rows)))
        per_seed = "; ".join(f"p{g}: {' / '.join(f'{s:.2f}' for s in scores)}"
                             for g, scores in sorted(by_seed.items()))  # fmt: skip
        print(f"{name} = {key} {task}: {len(by_seed)} pretraining runs ({per_seed})")
    check_shared(units, [args.a, args.b])  # both arms found: arm_runs names a missing one
    d = interval.difference(*loaded["A"][:1], *loaded["B"][:1], kind, loaded["A"][1],
                            loaded["B"][1])  # fmt: skip
    verdict = "holds" if d["low"] > 0 else "reversed" if d["high"] < 0 else "unresolved"
    print(f"A - B on {kind}: {d['diff']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}], df "
          f"{d['df']:.1f}, {d['units'][0]} and {d['units'][1]} pretraining runs, {d['examples']} "
          f"dev examples: {verdict}")  # fmt: skip
    if verdict == "unresolved":
        runs = interval.runs_to_resolve(d)
        print(f"at the measured spreads, about {runs} pretraining runs an arm would resolve a "
              "difference this size" if runs else
              "at the measured spreads, 20 pretraining runs an arm would not resolve it")


if __name__ == "__main__":
    main()
