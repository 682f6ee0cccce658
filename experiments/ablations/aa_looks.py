"""A comparison read at several designs, and what that does to its error: the A/A test over
the looks a sweep took (bert_jax.ablations.aa_test.looks_p_values).

    python experiments/ablations/aa_looks.py \\
        --report experiments/ablations/results/table5_cpu_2026-11-30_units_conll.json \\
        --claim "MLM (No NSP) beats LTR & No NSP on conll" --a "No NSP" --b "LTR & No NSP" \\
        --task conll --looks 2/2,3/3,5/3,6/3,7/3,8/3,8/5 --planned 10/5,12/5 \\
        --out experiments/ablations/results/aa_looks_table5_conll_mlm_ltr_DATE.json

A sweep that adds pretraining seeds until a comparison resolves reads the comparison once per
design, and each reading is a chance of a false verdict, so a 95% interval read at its seventh
look no longer errs 5%. For the report's two arms this prints:
- the comparison at each look, recomputed from the report's per-example rows (`A:B` means A's
  first A pretraining seeds against B's first B, in seed order);
- for A/A tables read at the same looks (2000 dev examples, the report's fine-tuning seeds per
  run; A's pretraining runs spread as measured, once as a normal of A's measured sd and once
  drawn from A's own centred run means, keeping their skew; B's a normal of its measured sd):
  the false-verdict rate at the series' last look alone, at any look read at 5%, and the level each
  look must be read at (constant, as Pocock's) to hold the rate over all of them at 5%;
- the verdict at the last look read at the stricter of the two levels: "holds" (or
  "reversed") below that level's 95% Monte Carlo interval, "unresolved" above it, "on the
  line" inside it (more A/A tables would narrow it).
The level holds the error at 5% only over a series of looks fixed before the data decide when
to stop, so `--planned` names the designs still to be read (simulated with the rest, not
observed): a series that grows each time a look fails to resolve would err more than 5%.
`--b "best constant"` and `--looks 2,3,...` judge an arm against the task's best constant.
Without `--claim` the comparison is the report's interval "A - B" on the task, a contrast the
table claims nothing about (Table 5's BERT against No NSP on conll).
About 60 ms an A/A table of 7 looks on one core: 2000 tables of each model in about 4 minutes.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from etils import epath

from bert_jax.ablations import aa_test, interval, provenance, stats
from bert_jax.ablations.evidence import Evidence, rows_path
from bert_jax.ablations.tables import compare


def parse_looks(text: str) -> list[tuple[int, int]]:
    """`8/3,8/5` -> [(8, 3), (8, 5)]; `8` -> [(8, 0)] (against the best constant)."""
    looks = []
    for item in text.split(","):
        a, sep, b = item.strip().partition("/")
        if not (a.isdigit() and (b.isdigit() or not sep)):
            raise SystemExit(f"--looks: {item!r} is not A/B or A (counts of pretraining runs)")
        looks.append((int(a), int(b or 0)))
    return looks


def first_seeds(runs: list, groups: list[int], count: int) -> tuple[list, list[int]]:
    """The runs of an arm's first `count` pretraining seeds, in seed order."""
    keep = set(sorted(set(groups))[:count])
    if len(keep) < count:
        raise SystemExit(f"a look asks for {count} pretraining runs; the arm has {len(keep)}")
    chosen = [i for i, g in enumerate(groups) if g in keep]
    return [runs[i] for i in chosen], [groups[i] for i in chosen]


def unit_means(runs: list, groups: list[int], task: str) -> np.ndarray:
    """Each pretraining run's mean fine-tuning score (the interval's units)."""
    metric, n = stats.metric_of(task), len(runs[0])
    scores = [stats.headline(metric, r.sum(0), n) for r in runs]
    return np.array([np.mean([s for s, g in zip(scores, groups, strict=True) if g == k])
                     for k in dict.fromkeys(groups)])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", required=True, help="an assembled table's json")
    parser.add_argument("--claim", default="", help="the claim, as the report words it (none: "
                        "the report's interval 'A - B' on --task)")  # fmt: skip
    parser.add_argument("--a", required=True, help="arm A (the one claimed ahead)")
    parser.add_argument("--b", required=True, help=f"arm B, or '{stats.BEST_CONSTANT}'")
    parser.add_argument("--task", required=True)
    parser.add_argument("--looks", required=True, help="A/B,A/B,...: the designs read, in order")
    parser.add_argument("--planned", default="", help="A/B,...: the designs still to be read")
    parser.add_argument("--sims", type=int, default=2000, help="A/A tables per spread model")
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    looks, fixed = parse_looks(args.looks), args.b == stats.BEST_CONSTANT
    planned = parse_looks(args.planned) if args.planned else []
    doc = json.loads(epath.Path(args.report).read_text())
    if args.claim:
        claim = next((c for c in doc["claims"] if c["claim"] == args.claim), None)
        if claim is None:
            raise SystemExit(f"{args.report}: no claim {args.claim!r}")
    else:  # a contrast of two of the report's arms that the table claims nothing about
        if (d := compare.interval(doc, args.a, args.b, args.task)) is None:  # either order
            raise SystemExit(f"{args.report}: no interval {args.a!r} - {args.b!r} on {args.task}")
        claim = {"claim": f"{args.a} - {args.b} on {args.task}", "interval": [d["low"], d["high"]]}
    evidence = Evidence.load(rows_path(epath.Path(args.report)))
    try:
        runs_a, groups_a = evidence.examples[args.a][args.task], evidence.groups[args.a][args.task]
        if fixed:
            runs_b, groups_b = [evidence.constants[args.task]], None
        else:
            runs_b = evidence.examples[args.b][args.task]
            groups_b = evidence.groups[args.b][args.task]
    except KeyError as e:
        raise SystemExit(f"{args.report}: its rows have no {e} (arms: "
                         f"{', '.join(evidence.examples)})") from None  # fmt: skip
    observed = []
    for g_a, g_b in looks:
        ra, ga = first_seeds(runs_a, groups_a, g_a)
        rb, gb = (runs_b, None) if fixed else first_seeds(runs_b, groups_b, g_b)
        d = interval.difference(ra, rb, args.task, groups_a=ga, groups_b=gb)
        observed.append({"look": [g_a, g_b], "diff": d["diff"], "low": d["low"],
                         "high": d["high"], "df": d["df"], "p": aa_test.p_value(d)})  # fmt: skip
        print(f"{g_a}:{g_b}  {d['diff']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]  "
              f"df {d['df']:.1f}  p {observed[-1]['p']:.4f}")  # fmt: skip
    if not np.allclose(claim["interval"], [observed[-1]["low"], observed[-1]["high"]]):
        raise SystemExit(f"{args.report}: the claim's interval {claim['interval']} is not the last "
                         f"look's: give --looks up to the report's design")  # fmt: skip
    last_a, last_b = looks[-1]
    means_a = unit_means(ra, ga, args.task)  # the last look's runs, from the loop above
    sd_a = float(np.std(means_a, ddof=1))
    sd_b = 0.0 if fixed else float(np.std(unit_means(rb, gb, args.task), ddof=1))
    finetune_seeds = round(len(runs_a) / len(set(groups_a)))
    simulated = {}
    for name, shifts in {"normal": None, "drawn from A's run means": means_a}.items():
        start = time.time()
        p_SxK = aa_test.looks_p_values(looks + planned, finetune_seeds, sd_a, args.sims,
                                       spread_b=sd_b, shifts_a=shifts, examples=args.examples,
                                       b_fixed=fixed)  # fmt: skip
        simulated[name] = aa_test.looks_error(p_SxK)
        print(f"A/A, A's runs {name} (sd {sd_a:.2f}), B's {'fixed' if fixed else 'normal'} "
              f"(sd {sd_b:.2f}): {simulated[name]} ({time.time() - start:.0f} s)",
              flush=True)  # fmt: skip
    stricter = min(simulated.values(), key=lambda s: s["level_per_look"])
    level, (level_low, level_high) = stricter["level_per_look"], stricter["level_per_look_mc"]
    last = observed[-1]
    # Called only clear of the level's Monte Carlo interval; inside it, on the line.
    verdict = ("on the line" if level_low <= last["p"] <= level_high else
               "unresolved" if last["p"] > level_high else
               "holds" if last["diff"] > 0 else "reversed")  # fmt: skip
    print(f"last look {last_a}:{last_b}: p {last['p']:.4f} against the level per look "
          f"{level:.4f} [{level_low:.4f}, {level_high:.4f}] over {len(looks)} looks and "
          f"{len(planned)} planned: {verdict}")  # fmt: skip
    if args.out:
        out = {"commit": provenance.commit(), "date": time.strftime("%Y-%m-%d"),
               "report": epath.Path(args.report).name, "claim": claim["claim"], "a": args.a,
               "b": args.b, "task": args.task, "looks": [list(k) for k in looks],
               "planned": [list(k) for k in planned],
               "sims": args.sims, "examples": args.examples, "finetune_seeds": finetune_seeds,
               "spreads": [sd_a, sd_b], "observed": observed, "simulated": simulated,
               "level_per_look": level, "level_per_look_mc": [level_low, level_high],
               "verdict_over_looks": verdict}  # fmt: skip
        epath.Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
