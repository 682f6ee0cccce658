"""Pretraining train-step throughput: bert-jax vs transformers' PyTorch BertForPreTraining + AdamW,
same CPU, same process, interleaved rounds; plus our MFU vs a measured f32 matmul peak.

  python experiments/bench/bench_pretrain.py [--steps 10] [--rounds 3] [--configs mini,small]

Configs mini (L4/H256) and small (L4/H512), seq 128, batch 32, vocab 30522, 20 masked positions,
float32 (`--dtype bfloat16`: our compute in bfloat16, PyTorch's forward under bf16 autocast; both
keep float32 weights and optimizer state; a matmul probe prints f32 and bf16 GFLOP/s of each),
MLM + NSP, one optimizer step per train step (forward, backward, clip, AdamW update).
Each round times `--steps` steps of ours then of PyTorch; the table shows the median round.
Tokens/s is wall-clock; tokens per CPU-second (user + sys of this process) is the fairer number on
a shared machine. Note the heads differ by design: ours projects to the vocabulary only at the 20
masked positions (as the reference and NVIDIA do), transformers' BertForPreTraining at all 128.
MFU counts our model FLOPs (bert_jax.train.flops, sparse head) against the measured matmul peak,
per wall-second (MFU) and per CPU-second (MFU/cpu-s: step FLOPs per CPU-second of the step over
matmul FLOPs per CPU-second; robust to other processes sharing the cores).
On an accelerator, `--configs base,large --seq 128,512` reports our MFU against the chip peak;
on an NVIDIA GPU PyTorch runs beside us on the same GPU (`--dtype bfloat16`: autocast "cuda"),
on a TPU host it is skipped (it would run on the CPU). `--batch` sets the batch (default 32).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

VOCAB, PRED = 30522, 20


def _batch(seq: int, batch: int, seed: int = 0, pred: int = PRED) -> dict[str, np.ndarray]:
    rs = np.random.RandomState(seed)
    ids = rs.randint(1000, VOCAB, size=(batch, seq)).astype(np.int32)
    pos = np.stack([np.sort(rs.choice(np.arange(1, seq), pred, replace=False))
                    for _ in range(batch)]).astype(np.int32)  # fmt: skip
    return {
        "input_ids": ids, "input_mask": np.ones((batch, seq), np.int32),
        "segment_ids": (np.arange(seq)[None] >= seq // 2).astype(np.int32).repeat(batch, 0),
        "masked_lm_positions": pos, "masked_lm_ids": np.take_along_axis(ids, pos, 1),
        "masked_lm_weights": np.ones((batch, pred), np.float32),
        "example_mask": np.ones((batch,), np.float32),
        "next_sentence_labels": rs.randint(0, 2, size=(batch,)).astype(np.int32),
    }  # fmt: skip


class Ours:
    """Our train step on synthetic batches. `train`: training keys over the defaults (e.g.
    dropout_prng); `pred`: masked positions per sequence; the rest: model config overrides."""

    def __init__(self, preset_name: str, seq: int, dtype: str, batch: int,
                 train: dict | None = None, pred: int = PRED, **overrides) -> None:  # fmt: skip
        import jax
        import ml_collections

        from bert_jax.config import preset
        from bert_jax.pretraining.task import PretrainingTask
        from bert_jax.train import build_trainer, make_mesh

        cfg = preset(preset_name, vocab_size=VOCAB, dtype=dtype, **overrides)
        self.task = PretrainingTask(cfg, batch, seq, pred)
        config = ml_collections.ConfigDict(
            dict(
                optimizer="adamw", learning_rate=1e-4, train_steps=10_000, warmup_steps=100,
                seed=0, **(train or {}),
            )
        )  # fmt: skip
        mesh_cfg = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))
        self.trainer = build_trainer(config, self.task, make_mesh(mesh_cfg, jax.devices()[:1]))
        self.state = self.trainer.init_state()
        b = _batch(seq, batch, pred=pred)
        self.batch = {k: jax.device_put(b[k], self.trainer.batch_shardings[k])
                      for k in self.trainer.batch_shardings}  # fmt: skip
        self.flops = self.trainer.flops_per_step
        self.step(2)  # compile

    def step(self, n: int) -> None:
        import jax

        for _ in range(n):
            self.state, m = self.trainer.train_step(self.state, self.batch)
        jax.block_until_ready((self.state, m))


class Torch:
    """`bf16`: the forward under torch.autocast(device, bfloat16), PyTorch's usual mixed
    precision (weights, gradients and AdamW stay float32, as ours with dtype=bfloat16).
    `device`: "cpu", or "cuda" beside JAX on the same GPU."""

    def __init__(self, hidden: int, layers: int, seq: int, batch: int, bf16: bool = False,
                 device: str = "cpu") -> None:  # fmt: skip
        import torch
        from transformers import BertConfig, BertForPreTraining

        self.bf16, self.device = bf16, device

        torch.manual_seed(0)
        cfg = BertConfig(
            vocab_size=VOCAB,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=hidden // 64,
            intermediate_size=4 * hidden,
        )
        self.model = BertForPreTraining(cfg).train().to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, eps=1e-6,
                                     weight_decay=0.01)  # fmt: skip
        b = _batch(seq, batch)
        labels = np.full((batch, seq), -100, np.int64)
        np.put_along_axis(labels, b["masked_lm_positions"], b["masked_lm_ids"], 1)
        self.inputs = {k: torch.tensor(v, dtype=torch.long, device=device) for k, v in dict(
            input_ids=b["input_ids"], attention_mask=b["input_mask"],
            token_type_ids=b["segment_ids"], labels=labels,
            next_sentence_label=b["next_sentence_labels"]).items()}  # fmt: skip
        self.step(2)

    def step(self, n: int) -> None:
        import torch

        for _ in range(n):
            with torch.autocast(self.device, dtype=torch.bfloat16, enabled=self.bf16):
                loss = self.model(**self.inputs).loss
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
        if self.device == "cuda":
            torch.cuda.synchronize()


def _matmul_peak(n: int = 1024, reps: int = 8, rounds: int = 5) -> tuple[float, float]:
    """FLOP per wall-second and per CPU-second of a float32 n x n matmul chain (best round)."""
    import jax
    import jax.numpy as jnp

    a = jnp.ones((n, n), jnp.float32) / n

    @jax.jit
    def chain(x):
        for _ in range(reps):
            x = x @ a
        return x

    chain(a).block_until_ready()
    wall, cpu = [], []
    for _ in range(rounds):
        w, c = _time(lambda k: [chain(a).block_until_ready() for _ in range(k)], 3)
        wall.append(w)
        cpu.append(c)
    flops = reps * 2.0 * n**3
    return flops / min(wall), flops / max(min(cpu), 1e-9)


def matmul_probe(n: int = 1024, reps: int = 8) -> dict[str, float]:
    """GFLOP/s of an n x n matmul chain in float32 and bfloat16, for XLA and for PyTorch: whether
    either backend has bfloat16 matrix hardware to use (AMX, AVX512-BF16) shows as a bf16 rate
    well above the f32 one."""
    import jax
    import jax.numpy as jnp
    import torch

    out = {}
    for dtype in ("float32", "bfloat16"):
        a = jnp.ones((n, n), dtype) / n

        @jax.jit
        def chain(x, a=a):
            for _ in range(reps):
                x = x @ a
            return x

        chain(a).block_until_ready()

        def jax_chain(k: int, a=a, chain=chain) -> None:
            for _ in range(k):
                chain(a).block_until_ready()

        w, _ = _time(jax_chain, 3)
        out[f"jax {dtype}"] = reps * 2.0 * n**3 / w / 1e9
        t = torch.ones((n, n), dtype=getattr(torch, dtype)) / n

        def torch_chain(k: int, t=t) -> None:
            for _ in range(k):
                x = t
                for _ in range(reps):
                    x = x @ t

        torch_chain(1)
        w, _ = _time(torch_chain, 3)
        out[f"torch {dtype}"] = reps * 2.0 * n**3 / w / 1e9
    return out


def _time(fn, steps: int) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), os.times()
    fn(steps)
    t1, c1 = time.perf_counter(), os.times()
    return (t1 - t0) / steps, (c1.user - c0.user + c1.system - c0.system) / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="mini,small")
    ap.add_argument("--seq", default="128")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()

    import jax
    import torch
    import transformers

    from bert_jax.config import preset
    from bert_jax.train.flops import peak_flops

    device = jax.devices()[0]
    on_cpu = device.platform == "cpu"
    # The peer on the same chip: beside JAX on CPU, or on the same GPU; not on a TPU host's CPU.
    on_gpu = device.platform == "gpu" and torch.cuda.is_available()
    torch_device = "cpu" if on_cpu else "cuda" if on_gpu else None
    if on_cpu:
        peak, peak_cpu = _matmul_peak()
        peak_source = f"measured f32 matmul, {peak_cpu / 1e9:.1f} GFLOP per CPU-second"
    else:
        peak, peak_source = peak_flops([device])
        peak_cpu = float("nan")
    cpu = platform.processor() or platform.machine()
    print(f"machine: {cpu}, {os.cpu_count()} CPUs; jax {jax.__version__} ({device.platform}), "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"transformers {transformers.__version__}")  # fmt: skip
    print(f"peak: {peak_source} = {peak / 1e9:.1f} GFLOP/s; batch {args.batch}, {PRED} masked "
          f"positions, vocab {VOCAB}, {args.dtype}, {args.steps} steps x {args.rounds} "
          "rounds")  # fmt: skip
    if on_cpu:
        probe = matmul_probe()
        print("matmul probe (1024^2 chain), GFLOP/s: "
              + ", ".join(f"{k} {v:.0f}" for k, v in probe.items()))  # fmt: skip
    print()
    head = (f"{'config':<16}{'seq':>5}{'ours tok/s':>12}{'torch tok/s':>13}{'ratio':>7}"
            f"{'ours tok/cpu-s':>16}{'torch tok/cpu-s':>17}{'ratio':>7}{'MFU':>7}"
            f"{'MFU/cpu-s':>11}")  # fmt: skip
    print(head)
    print("-" * len(head))
    for name in args.configs.split(","):
        cfg = preset(name)
        for seq in map(int, args.seq.split(",")):
            ours = Ours(name, seq, args.dtype, args.batch)
            bf16 = args.dtype == "bfloat16"
            shape = (cfg.hidden_size, cfg.num_hidden_layers, seq, args.batch, bf16)
            theirs = Torch(*shape, device=torch_device) if torch_device else None
            o_wall, o_cpu, t_wall, t_cpu = [], [], [], []
            for _ in range(args.rounds):
                w, c = _time(ours.step, args.steps)
                o_wall.append(w)
                o_cpu.append(c)
                if theirs is not None:
                    w, c = _time(theirs.step, args.steps)
                    t_wall.append(w)
                    t_cpu.append(c)
            tokens = args.batch * seq
            ow, oc = statistics.median(o_wall), statistics.median(o_cpu)
            mfu = ours.flops / ow / peak
            mfu_cpu = ours.flops / oc / peak_cpu
            label = f"{name} L{cfg.num_hidden_layers}/H{cfg.hidden_size}"
            if theirs is None:
                print(f"{label:<16}{seq:>5}{tokens / ow:>12,.0f}{'-':>13}{'-':>7}"
                      f"{tokens / oc:>16,.0f}{'-':>17}{'-':>7}{100 * mfu:>6.1f}%")  # fmt: skip
                continue
            tw, tc = statistics.median(t_wall), statistics.median(t_cpu)
            print(f"{label:<16}{seq:>5}{tokens / ow:>12,.0f}{tokens / tw:>13,.0f}{tw / ow:>6.2f}x"
                  f"{tokens / oc:>16,.0f}{tokens / tc:>17,.0f}{tc / oc:>6.2f}x"
                  f"{100 * mfu:>6.1f}%{100 * mfu_cpu:>10.1f}%")  # fmt: skip
            del ours, theirs


if __name__ == "__main__":
    main()
