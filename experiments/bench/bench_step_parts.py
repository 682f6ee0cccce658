"""Where one pretraining step's time goes: the same step timed with one suspect switched off at a
time, in one process, interleaved rounds (a prepared check for an accelerator session).

  python experiments/bench/bench_step_parts.py [--config small] [--batch 256] [--steps 20]

Variants of our BERT step (MLM + NSP, AdamW, batch x 128 tokens, bfloat16 compute):
- `as trained`: dropout 0.1 on hidden states and attention probabilities (the recipe);
- `no attention dropout`: attention takes jax.nn.dot_product_attention instead of the explicit
  float32 softmax + dropout over batch x heads x L x L;
- `cudnn attention` (GPU only): that, with the fused cuDNN kernel;
- `no dropout`: no random bits drawn at all;
- `float32`: the recipe in float32 compute.
Each prints tokens/s and its time against `as trained`. What a variant saves is what that part
costs; the rest is the encoder's matmuls, the head and the optimizer. On CPU it runs too
(`--batch 32`), which is how it is checked; the GPU question it answers is in the README
(our bfloat16 step at 0.58x of PyTorch's on an H100).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pretrain import Ours  # noqa: E402


def variants(on_gpu: bool) -> dict[str, dict]:
    out = {
        "as trained": dict(dtype="bfloat16"),
        "no attention dropout": dict(dtype="bfloat16", attention_probs_dropout_prob=0.0),
        "no dropout": dict(
            dtype="bfloat16", attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0
        ),  # fmt: skip
        "float32": dict(dtype="float32"),
    }
    if on_gpu:
        out["cudnn attention"] = dict(out["no attention dropout"], attention_implementation="cudnn")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="small")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    import jax

    device = jax.devices()[0]
    shape = f"batch {args.batch} x {args.seq}, {args.steps} steps x {args.rounds} rounds"
    print(
        f"{device.device_kind} ({device.platform}), jax {jax.__version__}; {args.config}, " + shape
    )
    steps = {}
    for name, knobs in variants(device.platform == "gpu").items():
        dtype = knobs.pop("dtype")
        steps[name] = Ours(args.config, args.seq, dtype, args.batch, **knobs)
    times = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, ours in steps.items():
            start = time.perf_counter()
            ours.step(args.steps)
            times[name].append((time.perf_counter() - start) / args.steps)
    base = statistics.median(times["as trained"])
    tokens = args.batch * args.seq
    print(f"\n{'variant':<24}{'ms/step':>10}{'tokens/s':>12}{'vs as trained':>15}")
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"{name:<24}{1e3 * t:>10.2f}{tokens / t:>12,.0f}{t / base:>14.2f}x")


if __name__ == "__main__":
    main()
