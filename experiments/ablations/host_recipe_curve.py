"""The `host` scale's pretraining recipe before and after 2026-11-29, shrunk to run here: learning
curves of held-out masked-LM accuracy, several seeds each, on the same training sequences in the
same order, each recipe at its own batch (so the new one takes fewer, larger steps).

  taskset -c 0 python experiments/ablations/host_recipe_curve.py \
      --out experiments/ablations/results/host_recipe_cpu_2026-11-29.json   # ~30 min, 1 core
  python experiments/ablations/host_recipe_curve.py --report FILE.json     # the table again

The recipes: `old` is `bert-jax ablate --scale host --steps 100000 --batch 256 --learning_rate
5e-4 --warmup 2000 --pretrain_dropout 0.1` (the scale before 2026-11-29), `new` the scale now
(bert_jax/ablations/scales.py), both read through `scale_for` as the command reads them. Each is
shrunk the same way: its batch divided by --shrink (16: 256 -> 16, 1024 -> 64), its warmup the
same fraction of its steps, its rate and dropout (hidden and attention) kept; --steps is the old
recipe's (1500 of 16), the new one runs the steps that read the same sequences (375 of 64). The
model is the cpu scale's (L2-H128-A2). Sized to one core: a sequence costs ~11 ms to train on, so
a run is ~5 min (at --shrink 8, 1500 steps of 32 took 592 s).

Data, trainer and scoring are experiments/bench/bench_learning_curve.py's (reused, not copied):
the embedded corpus (3 MB, a tenth of its documents held out), a 2000-piece vocab, static masks,
MLM + NSP, AdamW (b2 0.999, wd 0.01, clip 1.0) with linear warmup and decay, as the ablation
harness pretrains; both recipes read the same sequences in the same order, cut into batches of
their own size. Seed s draws the initial weights (the same for both
recipes) and the dropout. Scored at the old recipe's --evals steps (the new one's at the same
sequences read) by held-out masked-LM accuracy, next to the context-free bar (the most frequent
training target at a [MASK], the shown token elsewhere: bert_jax.objectives.baselines, the bar
of the ablation harness's baselines.json). The difference new - old is given with its 95%
t-interval over seeds, paired by seed (same initial weights, same data), and Welch's beside it.

Prints one line per run, then the table; writes --out after every run and reuses the runs
already in it (same data, recipes and evals), so a killed run resumes.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import pathlib
import statistics
import subprocess
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
import bench_learning_curve as curve  # noqa: E402

from bert_jax.ablations.run import scale_for  # noqa: E402
from bert_jax.ablations.scales import Scale  # noqa: E402

# The host scale's recipe before 2026-11-29, as `bert-jax ablate` flags (scales.py says so too).
OLD_FLAGS = {"steps": 100_000, "batch": 256, "learning_rate": 5e-4, "warmup": 2000,
             "dropout": 0.1}  # fmt: skip
SIZE = "tiny"  # bench_learning_curve's name of L2-H128-A2, the cpu scale's model


@dataclasses.dataclass(frozen=True)
class Shrunk:
    """One recipe at the shrunk size: batch, steps, warmup steps, peak rate, dropout."""

    batch: int
    steps: int
    warmup: int
    learning_rate: float
    dropout: float


def shrink(scale: Scale, factor: int, sequences: int) -> Shrunk:
    """`scale`'s recipe with its batch divided by `factor`, for `sequences` training sequences,
    the warmup the same fraction of the steps."""
    batch = scale.batch // factor
    if batch * factor != scale.batch or sequences % batch:
        raise SystemExit(f"batch {scale.batch} / {factor} must be whole and divide the "
                         f"{sequences} sequences")  # fmt: skip
    steps = sequences // batch
    return Shrunk(batch, steps, round(steps * scale.warmup / scale.steps), scale.learning_rate,
                  scale.dropout)  # fmt: skip


def recipes(shrink_by: int, old_steps: int) -> dict[str, Shrunk]:
    old = scale_for("host", **OLD_FLAGS)
    sequences = old_steps * old.batch // shrink_by
    return {"old": shrink(old, shrink_by, sequences),
            "new": shrink(scale_for("host"), shrink_by, sequences)}  # fmt: skip


def rebatched(batches: list[dict], rows: int) -> list[dict]:
    """The batches' sequences in the same order, `rows` a batch (a partial last one dropped)."""
    cols = {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}
    n = len(cols["input_ids"]) // rows
    return [{key: v[i * rows : (i + 1) * rows] for key, v in cols.items()} for i in range(n)]


def paired_interval(new: list[float], old: list[float]) -> tuple[float, float | None, float | None]:
    """Mean of the per-seed differences new - old and its 95% t-interval (n - 1 dof); no
    interval for one seed or no spread."""
    from scipy import stats

    diffs = [a - b for a, b in zip(new, old, strict=True)]
    mean = statistics.mean(diffs)
    if len(diffs) < 2 or statistics.stdev(diffs) == 0:
        return mean, None, None
    half = float(stats.t.ppf(0.975, len(diffs) - 1)) * statistics.stdev(diffs) / len(diffs) ** 0.5
    return mean, mean - half, mean + half


def comparison(doc: dict) -> list[dict]:
    """Per evaluation point (sequences read): each recipe's accuracies and the difference."""
    rows = []
    per_old_step = doc["recipes"]["old"]["batch"]
    k = doc["recipes"]["new"]["batch"] // per_old_step
    by_seed = {name: {r["seed"]: r for r in runs} for name, runs in doc["runs"].items()}
    seeds = sorted(set(by_seed.get("old", {})) & set(by_seed.get("new", {})))
    for step in doc["evals"] if seeds else []:
        old = [by_seed["old"][s]["curve"][str(step)] for s in seeds]
        new = [by_seed["new"][s]["curve"][str(step // k)] for s in seeds]
        diff, lo, hi = paired_interval(new, old)
        _, wlo, whi = curve.difference_interval(new, old)
        rows.append({"sequences": step * per_old_step, "old_step": step, "new_step": step // k,
                     "seeds": seeds, "old": old, "new": new, "diff": diff, "low": lo, "high": hi,
                     "welch_low": wlo, "welch_high": whi})  # fmt: skip
    return rows


def _interval(lo: float | None, hi: float | None) -> str:
    return f"[{lo:+.4f}, {hi:+.4f}]" if lo is not None else "(no interval)"


def report(doc: dict) -> str:
    bar = doc["meta"]["baselines"]["unigram_or_copy"]
    r = doc["recipes"]
    lines = [
        f"held-out masked-LM accuracy, L2-H128-A2, mean [min, max] over seeds; context-free bar "
        f"{bar:.4f} (unigram {doc['meta']['baselines']['unigram']:.4f})",
        *(f"{name}: batch {x['batch']}, {x['steps']} steps, lr {x['learning_rate']:g}, warmup "
          f"{x['warmup']}, dropout {x['dropout']:g}" for name, x in r.items()),
        "", "| sequences read | old (step) | new (step) | new - old, paired 95% t | Welch 95% |",
        "|---|---|---|---|---|",
    ]  # fmt: skip
    for row in comparison(doc):
        lines.append(
            f"| {row['sequences']} | {curve._spread(row['old'])} ({row['old_step']}) | "
            f"{curve._spread(row['new'])} ({row['new_step']}) | {row['diff']:+.4f} "
            f"{_interval(row['low'], row['high'])} | "
            f"{_interval(row['welch_low'], row['welch_high'])} |"
        )
    for name, runs in doc["runs"].items():
        if runs:
            secs = statistics.mean(x["seconds"] for x in runs)
            lines.append(f"{name}: {secs:.0f} s per run (training + evaluations, mean)")
    return "\n".join(lines)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True,
                          check=False).stdout.rstrip("\n")  # fmt: skip


# What a run depends on beyond the library: its uncommitted changes are named in the results.
_SOURCES = (__file__, curve.__file__, "bert_jax/ablations/scales.py", "bert_jax/ablations/run.py")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1500, help="the old recipe's (shrunk) steps")
    ap.add_argument("--evals", default="200,400,800,1500", help="old-recipe steps to score at")
    ap.add_argument("--shrink", type=int, default=16, help="both recipes' batch divided by this")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--recipes", default="old,new", help="which to run (old, new)")
    ap.add_argument("--workdir", default="/tmp/host-recipe-curve", help="data, built once")
    ap.add_argument("--out", default="", help="results JSON (resumed from if present)")
    ap.add_argument("--report", default="", help="only print the table of this --out file")
    args = ap.parse_args()
    if args.report:
        print(report(json.loads(pathlib.Path(args.report).read_text())))
        return
    import jax

    jax.config.update("jax_default_matmul_precision", "highest")
    shrunk = recipes(args.shrink, args.steps)
    k = shrunk["new"].batch // shrunk["old"].batch
    evals = [int(s) for s in args.evals.split(",") if int(s) <= args.steps]
    if any(e % k for e in evals):
        raise SystemExit(f"--evals: each must be a multiple of {k} (the new recipe's step)")
    sequences = shrunk["old"].batch * shrunk["old"].steps
    batches = -(-sequences // curve.BATCH)  # bench_learning_curve's batches hold BATCH rows
    train, held_out, meta = curve.load(curve.prepare(pathlib.Path(args.workdir), batches))
    out = pathlib.Path(args.out) if args.out else None
    doc = {"what": __doc__.split("\n\n")[0].replace("\n", " "),
           "commit": _git("rev-parse", "--short", "HEAD"),
           "uncommitted": _git("status", "--porcelain", "--", *_SOURCES).splitlines(),
           "date": datetime.date.today().isoformat(), "device": "cpu, 1 core",
           "jax": jax.__version__, "model": "L2-H128-A2", "shrink": args.shrink,
           "old_flags": OLD_FLAGS, "meta": meta, "evals": evals,
           "recipes": {n: dataclasses.asdict(s) for n, s in shrunk.items()},
           "runs": {"old": [], "new": []}}  # fmt: skip
    if out is not None and out.exists():
        before = json.loads(out.read_text())
        same = all(before.get(key) == doc[key] for key in ("meta", "evals", "recipes"))
        if not same:
            raise SystemExit(f"{out}: made with other data, recipes or evals; give another --out")
        doc["runs"] = before["runs"]
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; {sequences} training "
          f"sequences; {len(held_out)} held-out batches; " + "; ".join(
              f"{n}: {dataclasses.asdict(s)}" for n, s in shrunk.items()), flush=True)  # fmt: skip
    for seed in (int(s) for s in args.seeds.split(",")):
        for name in args.recipes.split(","):
            if any(r["seed"] == seed for r in doc["runs"][name]):
                continue
            s = shrunk[name]
            points = {e * shrunk["old"].batch // s.batch for e in evals}
            acc, secs = curve.run_ours(
                SIZE, seed, rebatched(train, s.batch), held_out, meta["vocab_size"], points, None,
                attention_dropout=s.dropout, hidden_dropout=s.dropout,
                learning_rate=s.learning_rate, warmup=s.warmup,
            )  # fmt: skip
            doc["runs"][name].append({"seed": seed, "curve": acc, "seconds": secs})
            print(f"{name} seed {seed}: {acc} ({secs:.0f} s)", flush=True)
            if out is not None:
                doc["comparison"] = comparison(doc)
                out.write_text(json.dumps(doc, indent=1) + "\n")
    print()
    print(report(doc))


if __name__ == "__main__":
    main()
