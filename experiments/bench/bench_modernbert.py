"""ModernBERT masked-LM training step: bert-jax vs transformers' PyTorch ModernBertForMaskedLM
of the same size, same CPU, same process, interleaved rounds; plus our MFU.

  python experiments/bench/bench_modernbert.py [--size mini] [--seq 256] [--steps 5] [--rounds 3]

`--size` is a ModernBERT preset (mini: 4 x 256, 4 heads, GeGLU 384; base: 22 x 768), vocab
50368, batch 16, float32, local window 128 (so at --seq 256 the local layers see half the row).
One step = forward, masked-LM loss at 30% of the positions, backward, AdamW update. transformers
runs with its SDPA attention and projects only the masked positions (`sparse_prediction`, as
ModernBERT trains); ours gathers the masked positions before the head. The FLOPs for MFU are
ours (`bert_jax.arch.modernbert.pretraining.flops_per_step`: windowed attention counted as
computed keys, the window's). Tokens per CPU-second (user + sys of this process) is the fairer
number on a shared machine.

Measured 2026-11-27 (commit in the README's table), this 2-core machine shared with other jobs:
see experiments/bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import statistics

import numpy as np

VOCAB, BATCH = 50368, 16


def _shared():
    path = pathlib.Path(__file__).with_name("bench_pretrain.py")
    spec = importlib.util.spec_from_file_location("bench_pretrain", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _batch(seq: int) -> dict[str, np.ndarray]:
    rs = np.random.RandomState(0)
    pred = int(0.3 * seq)
    ids = rs.randint(1000, VOCAB - 100, size=(BATCH, seq)).astype(np.int32)
    pos = np.stack([np.sort(rs.choice(np.arange(1, seq), pred, replace=False))
                    for _ in range(BATCH)]).astype(np.int32)  # fmt: skip
    return {"input_ids": ids, "positions": pos, "labels": np.take_along_axis(ids, pos, 1)}


class Torch:
    def __init__(self, config, seq: int) -> None:
        import torch
        import transformers

        torch.manual_seed(0)
        hf = transformers.ModernBertConfig(**config.to_hf_dict(), sparse_prediction=True)
        self.model = transformers.ModernBertForMaskedLM(hf).train()
        self.model.config._attn_implementation = "sdpa"
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, eps=1e-6)
        b = _batch(seq)
        labels = np.full(b["input_ids"].shape, -100, np.int64)
        np.put_along_axis(labels, b["positions"], b["labels"], 1)
        self.inputs = dict(input_ids=torch.tensor(b["input_ids"], dtype=torch.long),
                           attention_mask=torch.ones(b["input_ids"].shape, dtype=torch.long),
                           labels=torch.tensor(labels))  # fmt: skip
        self.step(2)

    def step(self, n: int) -> None:
        for _ in range(n):
            loss = self.model(**self.inputs).loss
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()


class Ours:
    def __init__(self, config, seq: int) -> None:
        import jax
        import jax.numpy as jnp
        import optax
        from flax.core import meta

        from bert_jax.arch.modernbert import ModernBertForMaskedLM
        from bert_jax.arch.modernbert.pretraining import flops_per_step

        model = ModernBertForMaskedLM(config)
        b = _batch(seq)
        args = (b["input_ids"], np.ones_like(b["input_ids"]), None, b["positions"])
        params = meta.unbox(model.init(jax.random.key(0), *args))["params"]
        tx = optax.adamw(1e-4, eps=1e-6, weight_decay=0.0)

        def loss_fn(p):
            logits = model.apply({"params": p}, *args)
            return optax.softmax_cross_entropy_with_integer_labels(
                logits.astype(jnp.float32), b["labels"]
            ).mean()

        @jax.jit
        def step(p, opt_state):
            grads = jax.grad(loss_fn)(p)
            updates, opt_state = tx.update(grads, opt_state, p)
            return optax.apply_updates(p, updates), opt_state

        self._step, self.state = step, (params, tx.init(params))
        self.flops = flops_per_step(config, BATCH, seq, b["positions"].shape[1])
        self.step(2)

    def step(self, n: int) -> None:
        import jax

        for _ in range(n):
            self.state = self._step(*self.state)
        jax.block_until_ready(self.state)


def main() -> None:
    from bert_jax.arch.modernbert import preset

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="mini")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    config = preset(args.size, vocab_size=VOCAB, pad_token_id=0, cls_token_id=1, sep_token_id=2)
    shared = _shared()
    peak, peak_cpu = shared._matmul_peak()
    print(f"peak: measured f32 matmul {peak / 1e9:.1f} GFLOP/s, {peak_cpu / 1e9:.1f} GFLOP per "
          f"CPU-second; ModernBERT {args.size}, batch {BATCH} x {args.seq}, 30% masked, vocab "
          f"{VOCAB}, {args.steps} steps x {args.rounds} rounds")  # fmt: skip
    theirs, ours = Torch(config, args.seq), Ours(config, args.seq)
    o_wall, o_cpu, t_wall, t_cpu = [], [], [], []
    for _ in range(args.rounds):
        for fn, wall, cpu in ((ours.step, o_wall, o_cpu), (theirs.step, t_wall, t_cpu)):
            w, c = shared._time(fn, args.steps)
            wall.append(w)
            cpu.append(c)
    tokens = BATCH * args.seq
    ow, oc = statistics.median(o_wall), statistics.median(o_cpu)
    tw, tc = statistics.median(t_wall), statistics.median(t_cpu)
    print(f"tokens/s:          ours {tokens / ow:,.0f}  transformers {tokens / tw:,.0f}  "
          f"ratio {tw / ow:.2f}x")  # fmt: skip
    print(f"tokens/CPU-second: ours {tokens / oc:,.0f}  transformers {tokens / tc:,.0f}  "
          f"ratio {tc / oc:.2f}x")  # fmt: skip
    print(f"ours MFU {100 * ours.flops / ow / peak:.1f}% (per CPU-second "
          f"{100 * ours.flops / oc / peak_cpu:.1f}%)")


if __name__ == "__main__":
    main()
