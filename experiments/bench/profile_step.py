"""Where a pretraining step's time goes, in one invocation sized for a short lease on a GPU, and
the same on CPU (how it is checked): our BERT step timed with one suspect switched at a time, a
`jax.profiler` trace of the step as trained with its 20 most expensive device kernels, and the
same top 20 for transformers' BertForPreTraining step under torch.profiler, side by side.

  python experiments/bench/profile_step.py --out DIR [--config small] [--batch 256] [--seq 128]
      [--steps 10] [--rounds 2] [--only 'as trained,no dropout'] [--budget_s 420] [--no_torch]
  bash experiments/bench/profile_step.sh DIR ...   # on the lent GPU: installs what it needs first

Variants (model and training keys of our step; each prints ms/step, tokens/s, MFU and its time
against `as trained`): as trained (bfloat16, dropout 0.1 on hidden states and attention
probabilities, AdamW); no attention dropout (attention through jax.nn.dot_product_attention);
no dropout; dropout masks by rbg (XLA's RngBitGenerator instead of the threefry hash); scan over
layers; remat full; float32; cudnn attention (GPU only); 1 masked position (the MLM head almost
free); gradients only (no optimizer update); real shards (the input pipeline reading shards
create-pretraining-data wrote from the embedded corpus, instead of one synthetic batch on the
device). What a variant saves is what that part costs.

DIR gets variants.md, jax_top20.md, torch_top20.md, summary.json and trace/ (the raw
jax.profiler trace: TensorBoard's profile plugin or Perfetto read it). `--budget_s` stops adding
variants when the run has used that many seconds (a lease has minutes) and says which it left.
Kernels are read from the trace's device lines (GPU streams); on CPU, XLA's CPU threads stand in.
"""

from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import statistics
import sys
import time
from collections import defaultdict

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_pretrain import PRED, Ours, Torch  # noqa: E402

SHAPES = {"mini": (256, 4), "small": (512, 4), "medium": (512, 8), "base": (768, 12)}


def variants(on_gpu: bool) -> dict[str, dict]:
    """name -> Ours keywords (model overrides, `train` keys, `pred`) and `kind`."""
    no_attn = dict(attention_probs_dropout_prob=0.0)
    out = {
        "as trained": {},
        "no attention dropout": no_attn,
        "no dropout": dict(no_attn, hidden_dropout_prob=0.0),
        "dropout masks by rbg": dict(train={"dropout_prng": "rbg"}),
        "scan over layers": dict(scan_layers=True),
        "remat full": dict(remat_policy="full"),
        "float32": dict(dtype="float32"),
        "1 masked position": dict(pred=1),
        "gradients only": dict(kind="grads"),
        "real shards": dict(kind="input"),
    }
    if on_gpu:
        out["cudnn attention"] = dict(no_attn, attention_implementation="cudnn")
    return out


def make_shards(out: pathlib.Path, seq: int) -> str:
    """Static-masked NSP shards of the embedded corpus (a 2000-piece vocab: ids stay below the
    timed model's 30522 rows, and the reader's speed does not depend on the vocab)."""
    import subprocess

    data = out / "data"
    cli = [sys.executable, "-m", "bert_jax.cli"]
    if not (data / "vocab" / "vocab.txt").exists():
        vocab = ["build-vocab", "--input_file=embedded:", "--vocab_size=2000",
                 f"--output_dir={data / 'vocab'}", "--do_lower_case"]  # fmt: skip
        subprocess.run(cli + vocab, check=True)
    if not list((data / "shards").glob("*.tfrecord")):
        subprocess.run(cli + ["create-pretraining-data", "--input_file=embedded:",
                              f"--vocab_file={data / 'vocab' / 'vocab.txt'}",
                              f"--output_dir={data / 'shards'}", f"--max_seq_length={seq}",
                              f"--max_predictions_per_seq={PRED}", "--num_shards=4",
                              "--dupe_factor=1", "--do_lower_case"], check=True)  # fmt: skip
    return str(data / "shards" / "*.tfrecord")


class Timed:
    """One variant's step as a callable of n steps."""

    def __init__(self, name: str, args, knobs: dict, shards: str | None) -> None:
        import dataclasses

        import jax

        knobs = dict(knobs)
        kind = knobs.pop("kind", "step")
        dtype = knobs.pop("dtype", "bfloat16")
        self.ours = Ours(args.config, args.seq, dtype, args.batch, **knobs)
        self.name, self.kind = name, kind
        trainer = self.ours.trainer
        if kind == "grads":
            key = jax.random.PRNGKey(0)
            grads = jax.jit(lambda p, b: trainer._grads(p, b, key)[2])
            self.run = lambda n: [grads(self.ours.state.params, self.ours.batch) for _ in range(n)]
        elif kind == "input":
            task = dataclasses.replace(self.ours.task, train_files=shards)
            self.batches = task.train_input(trainer)
            self.run = self._from_input
        else:
            self.run = lambda n: self.ours.step(n)
        jax.block_until_ready(self.run(2))  # compile (and fill the input's prefetch)

    def _from_input(self, n: int):
        for _ in range(n):
            self.ours.state, m = self.ours.trainer.train_step(self.ours.state, next(self.batches))
        return m

    def time(self, n: int) -> float:
        import jax

        start = time.perf_counter()
        jax.block_until_ready(self.run(n))
        return (time.perf_counter() - start) / n


def top_device_kernels(trace_dir: pathlib.Path, n: int = 20) -> tuple[list[tuple], str]:
    """[(kernel, calls, total µs)] of the trace's device lines, most time first, and where they
    came from. GPU: the /device: processes' stream threads; CPU: XLA's CPU compute threads."""
    path = sorted(trace_dir.glob("plugins/profile/*/perfetto_trace.json.gz"))[-1]
    with gzip.open(path) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    procs, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e.get("tid"))] = e["args"]["name"]
    device = {p for p, name in procs.items()
              if name.startswith("/device:") and "CUSTOM" not in name}  # fmt: skip
    aggregate = ("XLA Modules", "Steps", "XLA TraceMe", "Framework")  # would count time twice

    def is_kernel(e: dict) -> bool:
        thread = threads.get((e["pid"], e.get("tid")), "")
        if device:
            return e["pid"] in device and not thread.startswith(aggregate)
        # CPU: HLO ops on the client's and Eigen's threads, not the executor's C++ wrappers
        return thread.startswith("tf_XLA") and "::" not in e["name"]

    total: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for e in events:
        if e.get("ph") == "X" and is_kernel(e):
            total[e["name"]] += float(e.get("dur", 0.0))
            calls[e["name"]] += 1
    rows = sorted(((k, calls[k], t) for k, t in total.items()), key=lambda r: -r[2])
    where = "device streams" if device else "XLA's CPU threads (no device in the trace)"
    return rows[:n], where


def torch_top(args, on_gpu: bool, n: int = 20) -> tuple[list[tuple], float]:
    """transformers' step under torch.profiler: [(op, calls, self µs)] and its seconds per step."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    hidden, layers = SHAPES[args.config]
    peer = Torch(hidden, layers, args.seq, args.batch, bf16=True,
                 device="cuda" if on_gpu else "cpu")  # fmt: skip
    start = time.perf_counter()
    peer.step(args.steps)
    seconds = (time.perf_counter() - start) / args.steps
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as prof:
        peer.step(3)
    if on_gpu:
        torch.cuda.synchronize()
    key = "self_device_time_total" if on_gpu else "self_cpu_time_total"
    rows = [(e.key, e.count, float(getattr(e, key, 0.0))) for e in prof.key_averages()]
    rows = sorted((r for r in rows if r[2] > 0), key=lambda r: -r[2])[:n]
    return [(k, c // 3, t / 3) for k, c, t in rows], seconds


def kernel_table(title: str, rows: list[tuple], step_s: float, per_step: float = 1.0) -> str:
    lines = [f"### {title}", "", "| kernel | calls/step | ms/step | share of step |",
             "|---|---|---|---|"]  # fmt: skip
    for name, calls, us in rows:
        ms = us / per_step / 1e3
        short = name if len(name) <= 90 else name[:87] + "..."
        lines.append(f"| `{short}` | {calls / per_step:g} | {ms:.3f} | "
                     f"{100 * ms / 1e3 / step_s:.1f}% |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default="small", choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated variant names")
    ap.add_argument("--budget_s", type=float, default=420.0)
    ap.add_argument("--no_torch", action="store_true")
    args = ap.parse_args()
    started = time.perf_counter()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import jax

    from bert_jax.train.flops import peak_flops

    device = jax.devices()[0]
    on_gpu = device.platform == "gpu"
    peak, peak_label = peak_flops([device])
    head = (
        f"{device.device_kind} ({device.platform}), jax {jax.__version__}; BERT-{args.config} "
        f"batch {args.batch} x {args.seq}, {args.steps} steps x {args.rounds} rounds"
    )
    print(head, flush=True)
    chosen = variants(on_gpu)
    if args.only:
        names = [v.strip() for v in args.only.split(",")]
        unknown = [v for v in names if v not in chosen]
        if unknown:
            raise SystemExit(f"--only: no variant {unknown}; variants: {', '.join(chosen)}")
        chosen = {k: v for k, v in chosen.items() if k in names or k == "as trained"}
    shards = make_shards(out, args.seq) if "real shards" in chosen else None
    timed, left = {}, []
    for name, knobs in chosen.items():
        if timed and time.perf_counter() - started > args.budget_s:
            left.append(name)
            continue
        timed[name] = Timed(name, args, knobs, shards)
        print(f"compiled {name} ({time.perf_counter() - started:.0f} s)", flush=True)
    times = {name: [] for name in timed}
    for _ in range(args.rounds):
        for name, t in timed.items():
            times[name].append(t.time(args.steps))
    tokens = args.batch * args.seq
    base = statistics.median(times["as trained"])
    flops = timed["as trained"].ours.flops
    lines = [head, "", f"MFU against {peak_label} ({peak / 1e12:.3g} TFLOP/s)", "",
             "| variant | ms/step | tokens/s | MFU | vs as trained |",
             "|---|---|---|---|---|"]  # fmt: skip
    summary = {"device": device.device_kind, "variants": {}, "left_out": left}
    for name, ts in times.items():
        t = statistics.median(ts)
        model_flops = timed[name].ours.flops
        lines.append(f"| {name} | {1e3 * t:.2f} | {tokens / t:,.0f} | "
                     f"{100 * model_flops / t / peak:.1f}% | {t / base:.2f}x |")  # fmt: skip
        summary["variants"][name] = {"s_per_step": t, "tokens_per_s": tokens / t}
    if left:
        lines.append(f"\nleft out (past --budget_s {args.budget_s:g}): {', '.join(left)}")
    (out / "variants.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[1:]), flush=True)

    trace_steps = 3
    with jax.profiler.trace(str(out / "trace"), create_perfetto_trace=True):
        timed["as trained"].time(trace_steps)
    rows, where = top_device_kernels(out / "trace")
    ours_md = kernel_table(f"ours, as trained ({where}), {base * 1e3:.2f} ms/step", rows, base,
                           per_step=trace_steps)  # fmt: skip
    (out / "jax_top20.md").write_text(ours_md)
    print("\n" + ours_md, flush=True)
    summary["jax_top20"] = rows
    if not args.no_torch:
        rows, torch_s = torch_top(args, on_gpu)
        torch_md = kernel_table(f"transformers BertForPreTraining, bf16 autocast, "
                                f"{torch_s * 1e3:.2f} ms/step", rows, torch_s)  # fmt: skip
        (out / "torch_top20.md").write_text(torch_md)
        print(torch_md, flush=True)
        summary["torch_top20"], summary["torch_s_per_step"] = rows, torch_s
        print(f"ours as trained / PyTorch eager: {torch_s / base:.2f}x tokens/s; MFU ours "
              f"{100 * flops / base / peak:.1f}%", flush=True)  # fmt: skip
    summary["seconds"] = time.perf_counter() - started
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"wrote {out} in {summary['seconds']:.0f} s")


if __name__ == "__main__":
    main()
