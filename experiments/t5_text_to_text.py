"""T5 text-to-text fine-tuning on the offline downstream suite: a span-corruption-pretrained
seq2seq workdir against the same model at its initialisation and the majority baseline.

    python experiments/t5_text_to_text.py --pretrained WD --workdir OUT [--seeds 3]
        [--epochs 30 --tasks sst2,squad]

WD is a `bert-jax pretrain --config t5.py:tiny` workdir (experiments/t5.md). The suite
(`bert_jax.ablations.suite`: sst2 = is the word order intact, squad = which context word fills
the "_" of the next sentence) is built from the held-out tenth of the embedded corpus (the
documents t5.md's run did not train on). Each (init, task, seed) runs `bert-jax finetune`'s
text-to-text path; the table gives the dev median and std over seeds (sst2: accuracy x 100;
squad: F1) and is written to OUT/results.json. On the tiny model expect minutes per run on a
2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import statistics

import jax
import numpy as np

from bert_jax.ablations.stats import majority_baseline
from bert_jax.ablations.suite import build_suite
from bert_jax.arch.seq2seq import EncoderDecoder
from bert_jax.arch.seq2seq.load import load_seq2seq
from bert_jax.arch.seq2seq.t5_checkpoints import export_t5
from bert_jax.corpus import embedded
from bert_jax.runs import finetune as runner
from bert_jax.train.config import finetune_config

TASKS = {"sst2": ("glue", 64, 4), "squad": ("squad", 160, 8)}  # family, inputs, targets


def fresh_copy(pretrained: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """The pretrained model's architecture at a fresh initialisation, as a Hugging Face dir."""
    pre = load_seq2seq(pretrained)
    ids = np.ones((1, 8), np.int32)
    params = EncoderDecoder(pre.config).init(jax.random.PRNGKey(0), ids, ids, ids)["params"]
    export_t5(pre.config, jax.device_get(params), out)
    shutil.copy(pre.spm_model, out / "spiece.model")
    return out


def run(init: pathlib.Path, task: str, data: pathlib.Path, out: pathlib.Path, seed: int,
        epochs: float) -> float:  # fmt: skip
    family, inputs, targets = TASKS[task]
    cfg = finetune_config(family)
    cfg.init_checkpoint, cfg.data_dir = str(init), str(data / task)
    if family == "glue":
        cfg.task = task
    else:
        cfg.train_file, cfg.predict_file = "train-v1.1.json", "dev-v1.1.json"
    cfg.max_seq_length, cfg.max_target_length = inputs, targets
    cfg.train_batch_size, cfg.eval_batch_size, cfg.learning_rate = 32, 64, 1e-3
    cfg.num_train_epochs, cfg.seed, cfg.num_devices, cfg.log_every_steps = epochs, seed, 1, 100
    metrics = runner.finetune(cfg, out)
    return 100.0 * metrics["accuracy"] if family == "glue" else metrics["f1"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pretrained", required=True, type=pathlib.Path)
    ap.add_argument("--workdir", required=True, type=pathlib.Path)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--train", type=int, default=1000)
    ap.add_argument("--dev", type=int, default=300)
    ap.add_argument("--epochs", type=float, default=30.0)
    ap.add_argument("--tasks", default=",".join(TASKS), help="comma-separated: sst2,squad")
    args = ap.parse_args()
    tasks = args.tasks.split(",")
    out = args.workdir
    docs = list(embedded.iter_documents())
    counts = build_suite(docs[-(len(docs) // 10) :], str(out / "suite"), args.train, args.dev)
    inits = {"pretrained": args.pretrained,
             "random init": fresh_copy(args.pretrained, out / "random_init")}  # fmt: skip
    results: dict = {"counts": counts, "arms": {}, "majority": {}}
    for task in tasks:
        results["majority"][task] = majority_baseline(str(out / "suite" / task), task)
        for name, init in inits.items():
            scores = [run(init, task, out / "suite", out / "runs" / name.replace(" ", "_") / task
                          / f"seed{s}", s, args.epochs) for s in range(args.seeds)]  # fmt: skip
            results["arms"].setdefault(name, {})[task] = {
                "median": statistics.median(scores),
                "std": statistics.stdev(scores) if len(scores) > 1 else 0.0, "runs": scores,
            }  # fmt: skip
            (out / "results.json").write_text(json.dumps(results, indent=2))
    print("| arm | " + " | ".join(tasks) + " |\n|---|" + "---|" * len(tasks))
    for name, row in results["arms"].items():
        cells = [f"{row[t]['median']:.1f} ± {row[t]['std']:.1f}" for t in tasks]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("| majority | " + " | ".join(f"{results['majority'][t]:.1f}" for t in tasks) + " |")


if __name__ == "__main__":
    main()
