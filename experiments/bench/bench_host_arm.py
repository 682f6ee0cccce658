"""One `--scale host` arm's pretraining for a fixed wall time on this machine's accelerator:
the harness's own config for Table 5's BERT arm at the scale's recipe (since 2026-11-29
BERT-small L4-H512-A8, 1024 x 128 tokens, bfloat16, MLM + NSP, lr 1e-3 warmed up over 1500 of
25k steps, no dropout; the 2026-11-28 H100 figure was at 256 x 128, lr 5e-4) reading its real input
pipeline, stopped by SIGTERM after `--seconds`. Prints tokens/s and MFU per logged interval
(MFU against the chip's published bf16 peak where bert_jax.accelerators lists it).

  python experiments/bench/bench_host_arm.py --workdir W --prepare     # vocab + shards only
  python experiments/bench/bench_host_arm.py --workdir W --seconds 150 # the run

The shards are NSP pairs of the embedded corpus (6.5 MB of text), one masking of the text
instead of the scale's five: a few minutes at GPU speed read that text many times over, which
the host scale refuses for a real arm (its repetition guard, off here) but which does not
change a step's speed. `--prepare` on any machine, then carry W: the shards are about 12 MB.
Expect the first interval to include compilation; the later ones are the steady rate.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import statistics
import threading

from etils import epath


def host_scale():  # noqa: ANN201 (a Scale; imported late so --help needs no JAX)
    from bert_jax.ablations.scales import SCALES

    return dataclasses.replace(SCALES["host"], dupe_factor=1, warn_repetition=0.0,
                               max_repetition=0.0)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--prepare", action="store_true", help="write the vocab and shards, no run")
    ap.add_argument("--seconds", type=float, default=150.0, help="wall time before SIGTERM")
    ap.add_argument("--log_every", type=int, default=500)
    args = ap.parse_args()

    import jax

    from bert_jax.ablations import tables
    from bert_jax.ablations.harness import Harness
    from bert_jax.runs.pretrain import run_pretraining

    scale = host_scale()
    harness = Harness(args.workdir, scale, progress=print)
    arm = tables.get("5").arms(scale)[0]  # BERT (MLM + NSP)
    config = harness.pretrain_config(arm.pretrain)  # builds the vocab and shards once
    if args.prepare:
        print(f"prepared {args.workdir}: {config.train_files}")
        return
    config.log_every_steps = args.log_every
    run_dir = epath.Path(args.workdir) / "run"
    if run_dir.exists():
        run_dir.rmtree()  # a fresh run each time: a resumed one would time the restore
    device = jax.devices()[0]
    print(f"{arm.name}: {arm.pretrain.model} {scale.batch} x {scale.seq}, {scale.dtype}, on "
          f"{device.device_kind} ({device.platform}); SIGTERM after {args.seconds:g} s")
    timer = threading.Timer(args.seconds, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        run_pretraining(config, str(run_dir))
    finally:
        timer.cancel()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "tokens_per_sec" in r]
    print(f"\n{'step':>7}{'tokens/s':>12}{'seq/s':>9}{'MFU':>8}  loss")
    for r in rows:
        print(f"{r['step']:>7}{r['tokens_per_sec']:>12,.0f}{r['seq_per_sec']:>9,.0f}"
              f"{100 * r['mfu']:>7.1f}%  {r['loss']:.3f}")  # fmt: skip
    steady = rows[1:] or rows
    if steady:
        peak = steady[-1]["peak_flops"]
        print(f"steady (median of {len(steady)} intervals after the first): "
              f"{statistics.median(r['tokens_per_sec'] for r in steady):,.0f} tokens/s, MFU "
              f"{100 * statistics.median(r['mfu'] for r in steady):.1f}% of "
              f"{peak / 1e12:.3g} TFLOP/s")  # fmt: skip


if __name__ == "__main__":
    main()
