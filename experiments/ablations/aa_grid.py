"""The A/A grid: how often each interval calls one of two equal arms ahead (bert_jax.ablations.
aa_test), over pretraining-run spreads, pretraining seeds and fine-tuning seeds. The tables'
interval (`welch`, bert_jax.ablations.interval) must stay at or under 5% in every cell; the
two-level bootstrap it replaced is printed beside it where asked (`--bootstrap_sims`).

    python experiments/ablations/aa_grid.py --out experiments/ablations/results/aa_grid.json

About 15 minutes on 2 cores at the defaults (2000 A/A tables per cell for the interval, 1-2 s a
cell; 400 for the bootstrap, about 40 s a cell; 2000 examples). Prints a markdown table (rows:
seeds; columns: spreads) and writes the json with the commit it ran at.

    python experiments/ablations/aa_grid.py --unequal --out results_unequal.json

Arms of unequal pretraining runs (6 against 3, as an assembled table has them), and equal means
with unequal spreads (6.3 points against 0.8, as MLM's and LTR's runs on conll), at 2
fine-tuning seeds: the interval's false verdicts there (about 3 s a cell, 2 minutes in all).

    python experiments/ablations/aa_grid.py --unequal --item_spread 15 --out results_items.json

Either grid with each arm's own item shifts (sd 15 points, aa_test.simulate_arm): arms that
are equal over the population of items but not item by item, as two models are, so the
interval's examples term carries weight (0.17 points squared at 15, against 0.04-0.33 in the
committed tables and about 0.005 without).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

from bert_jax.ablations.aa_test import false_verdict_rate
from bert_jax.ablations.provenance import commit

SPREADS = (0.0, 1.3, 2.6, 5.2, 10.0)  # points of score between pretraining runs (sd)
PRETRAIN_SEEDS = (2, 3, 4, 6)
FINETUNE_SEEDS = (1, 2, 3)
# Arm A's pretraining runs, B's (2 vs 3: the ELECTRA table, random init's third run added).
UNEQUAL_SEEDS = ((6, 3), (8, 3), (2, 6), (3, 6), (2, 3), (3, 3), (6, 6))
UNEQUAL_SPREADS = ((0.0, 0.0), (2.6, 2.6), (5.2, 5.2), (10.0, 10.0), (6.3, 0.8), (0.8, 6.3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=2000, help="A/A tables per cell (interval)")
    parser.add_argument("--bootstrap_sims", type=int, default=400,
                        help="A/A tables per cell for the old bootstrap (0: skip it)")
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--out", default="")
    parser.add_argument("--unequal", action="store_true",
                        help="the unequal-arms grid instead (UNEQUAL_SEEDS x UNEQUAL_SPREADS)")
    parser.add_argument("--item_spread", type=float, default=0.0,
                        help="each arm's own shift of each item's chance (sd, points)")
    args = parser.parse_args()
    if args.unequal:
        return _unequal(args)
    cells = []
    for g, f, spread in itertools.product(PRETRAIN_SEEDS, FINETUNE_SEEDS, SPREADS):
        start = time.time()
        cell = {"pretrain_seeds": g, "finetune_seeds": f, "spread": spread,
                "welch": false_verdict_rate("welch", g, f, spread, args.sims, args.examples,
                                            item_spread=args.item_spread)}
        # The bootstrap only where the audit measured it (3 fine-tuning seeds): it is slow.
        if args.bootstrap_sims and f == 3:
            cell["bootstrap"] = false_verdict_rate("bootstrap", g, f, spread,
                                                   args.bootstrap_sims, args.examples,
                                                   item_spread=args.item_spread)
        cells.append(cell)
        print(f"{g} x {f} spread {spread}: {cell} ({time.time() - start:.0f} s)", flush=True)
    header = "| pretraining x fine-tuning seeds | " + " | ".join(f"{s} pts" for s in SPREADS)
    lines = [header + " |", "|---" * (len(SPREADS) + 1) + "|"]
    for g, f in itertools.product(PRETRAIN_SEEDS, FINETUNE_SEEDS):
        row = [c for c in cells if c["pretrain_seeds"] == g and c["finetune_seeds"] == f]
        text = [f"{100 * c['welch']:.1f}%" + (f" ({100 * c['bootstrap']:.1f}%)"
                                             if "bootstrap" in c else "") for c in row]  # fmt: skip
        lines.append(f"| {g} x {f} | " + " | ".join(text) + " |")
    print("\n".join(lines))
    if args.out:
        _write(args.out, {"sims": args.sims, "bootstrap_sims": args.bootstrap_sims,
                          "examples": args.examples, "finetune_spread": 1.0,
                          "item_spread": args.item_spread, "cells": cells})


def _unequal(args: argparse.Namespace) -> None:
    cells = []
    for (g_a, g_b), (s_a, s_b) in itertools.product(UNEQUAL_SEEDS, UNEQUAL_SPREADS):
        rate = false_verdict_rate("welch", g_a, 2, s_a, args.sims, args.examples,
                                  pretrain_seeds_b=g_b, spread_b=s_b,
                                  item_spread=args.item_spread)  # fmt: skip
        cells.append({"pretrain_seeds": [g_a, g_b], "spreads": [s_a, s_b], "welch": rate})
        print(f"{g_a} vs {g_b} runs, spreads {s_a} / {s_b}: {100 * rate:.1f}%", flush=True)
    names = [f"{a} / {b} pts" if a != b else f"{a} pts" for a, b in UNEQUAL_SPREADS]
    lines = ["| pretraining runs, A vs B (2 fine-tuning seeds) | " + " | ".join(names) + " |",
             "|---" * (len(names) + 1) + "|"]  # fmt: skip
    for g_a, g_b in UNEQUAL_SEEDS:
        row = [c for c in cells if c["pretrain_seeds"] == [g_a, g_b]]
        lines.append(f"| {g_a} vs {g_b} | " + " | ".join(f"{100 * c['welch']:.1f}%" for c in row)
                     + " |")  # fmt: skip
    print("\n".join(lines))
    if args.out:
        _write(args.out, {"sims": args.sims, "examples": args.examples, "finetune_seeds": 2,
                          "finetune_spread": 1.0, "item_spread": args.item_spread,
                          "cells": cells})  # fmt: skip


def _write(path: str, doc: dict) -> None:
    doc = {"commit": commit(), "date": time.strftime("%Y-%m-%d"), **doc}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
