"""Masked-LM training step per BERT-family model: bert-jax vs transformers' PyTorch class of the
same family and size, same CPU, same process, interleaved rounds; plus our MFU.

  python experiments/bench/bench_family.py [--families bert,roberta,albert,electra,distilbert]
      [--size mini] [--seq 128] [--steps 5] [--rounds 3]

Each family at the `--size` preset's shape (mini: L4/H256/A4, I 1024), vocab 30522, batch 16,
float32; one step = forward, masked-LM loss at 20 masked positions per row, backward, AdamW
update (no clipping on either side). ALBERT shares all layers and factorises the embeddings
(E=128), ELECTRA is its generator-style masked LM with E=128 projected, RoBERTa has one token
type and the position offset, DistilBERT has no token types or pooler. transformers' masked-LM
classes project to the vocabulary at every position, ours only at the masked ones (as the
reference does): that is part of what is measured, and the FLOPs used for MFU are ours.
Tokens per CPU-second (user + sys of this process) is the fairer number on a shared machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import statistics

import numpy as np

VOCAB, BATCH, PRED = 30522, 16, 20
E = 128  # ALBERT's and ELECTRA-Small's embedding width
_HF_CLASS = {
    "bert": ("BertConfig", "BertForMaskedLM", {}),
    "roberta": ("RobertaConfig", "RobertaForMaskedLM", {"type_vocab_size": 1}),
    "albert": ("AlbertConfig", "AlbertForMaskedLM", {"embedding_size": E}),
    "electra": ("ElectraConfig", "ElectraForMaskedLM", {"embedding_size": E}),
    "distilbert": ("DistilBertConfig", "DistilBertForMaskedLM", {}),
}


def _shared():
    """_time and _matmul_peak of bench_pretrain.py, beside this file."""
    path = pathlib.Path(__file__).with_name("bench_pretrain.py")
    spec = importlib.util.spec_from_file_location("bench_pretrain", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _batch(seq: int, pad_id: int) -> dict[str, np.ndarray]:
    rs = np.random.RandomState(0)
    ids = rs.randint(1000, VOCAB, size=(BATCH, seq)).astype(np.int32)
    pos = np.stack([np.sort(rs.choice(np.arange(1, seq), PRED, replace=False))
                    for _ in range(BATCH)]).astype(np.int32)  # fmt: skip
    return {"input_ids": ids, "input_mask": np.ones((BATCH, seq), np.int32), "positions": pos,
            "labels": np.take_along_axis(ids, pos, 1), "pad_id": pad_id}  # fmt: skip


def _sizes(size: str) -> dict:
    from bert_jax.config import preset

    c = preset(size)
    return dict(hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
                num_attention_heads=c.num_attention_heads, intermediate_size=c.intermediate_size,
                vocab_size=VOCAB, max_position_embeddings=514)  # fmt: skip


class Torch:
    def __init__(self, family: str, size: str, seq: int) -> None:
        import torch
        import transformers

        config_cls, model_cls, extra = _HF_CLASS[family]
        s = _sizes(size)
        if family == "distilbert":
            s = dict(vocab_size=VOCAB, dim=s["hidden_size"], n_layers=s["num_hidden_layers"],
                     n_heads=s["num_attention_heads"],
                     hidden_dim=s["intermediate_size"])  # fmt: skip
        torch.manual_seed(0)
        cfg = getattr(transformers, config_cls)(**s, **extra)
        self.model = getattr(transformers, model_cls)(cfg).train()
        self.config = cfg
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, eps=1e-6)
        b = _batch(seq, 1 if family == "roberta" else 0)
        labels = np.full(b["input_ids"].shape, -100, np.int64)
        np.put_along_axis(labels, b["positions"], b["labels"], 1)
        self.inputs = dict(input_ids=torch.tensor(b["input_ids"], dtype=torch.long),
                           attention_mask=torch.tensor(b["input_mask"], dtype=torch.long),
                           labels=torch.tensor(labels))  # fmt: skip
        self.step(2)

    def step(self, n: int) -> None:
        for _ in range(n):
            loss = self.model(**self.inputs).loss
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()


class Ours:
    def __init__(self, torch_config, seq: int) -> None:
        import jax
        import jax.numpy as jnp
        import optax
        from flax.core import meta

        from bert_jax.arch.bert.flops import pretraining_flops_per_step
        from bert_jax.arch.bert.heads import BertForPreTraining
        from bert_jax.arch.bert.hf_configs import config_from_hf

        self.config = config_from_hf(torch_config.to_dict(), "bench")
        model = BertForPreTraining(self.config, use_nsp=False)
        b = _batch(seq, 1 if self.config.family == "roberta" else 0)
        seg = np.zeros_like(b["input_ids"]) if self.config.type_vocab_size else None
        args = (b["input_ids"], b["input_mask"], seg, b["positions"])
        params = meta.unbox(model.init(jax.random.key(0), *args))["params"]
        tx = optax.adamw(1e-4, eps=1e-6, weight_decay=0.0)

        def loss_fn(p):
            logits = model.apply({"params": p}, *args, deterministic=False,
                                 rngs={"dropout": jax.random.key(1)}).mlm_logits  # fmt: skip
            return optax.softmax_cross_entropy_with_integer_labels(
                logits.astype(jnp.float32), b["labels"]
            ).mean()

        @jax.jit
        def step(p, opt_state):
            grads = jax.grad(loss_fn)(p)
            updates, opt_state = tx.update(grads, opt_state, p)
            return optax.apply_updates(p, updates), opt_state

        self._step, self.state = step, (params, tx.init(params))
        self.flops = pretraining_flops_per_step(self.config, BATCH, seq, PRED, use_nsp=False)
        self.step(2)

    def step(self, n: int) -> None:
        import jax

        for _ in range(n):
            self.state = self._step(*self.state)
        jax.block_until_ready(self.state)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", default="bert,roberta,albert,electra,distilbert")
    ap.add_argument("--size", default="mini")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    shared = _shared()
    peak, peak_cpu = shared._matmul_peak()
    print(f"peak: measured f32 matmul {peak / 1e9:.1f} GFLOP/s, {peak_cpu / 1e9:.1f} GFLOP per "
          f"CPU-second; {args.size}, batch {BATCH} x {args.seq}, {PRED} masked, vocab {VOCAB}, "
          f"{args.steps} steps x {args.rounds} rounds")  # fmt: skip
    head = (f"{'family':<12}{'ours tok/s':>12}{'torch tok/s':>13}{'ratio':>7}"
            f"{'ours tok/cpu-s':>16}{'torch tok/cpu-s':>17}{'ratio':>7}{'MFU':>7}"
            f"{'MFU/cpu-s':>11}")  # fmt: skip
    print(head)
    print("-" * len(head))
    tokens = BATCH * args.seq
    for family in args.families.split(","):
        theirs = Torch(family, args.size, args.seq)
        ours = Ours(theirs.config, args.seq)
        o_wall, o_cpu, t_wall, t_cpu = [], [], [], []
        for _ in range(args.rounds):
            for fn, wall, cpu in ((ours.step, o_wall, o_cpu), (theirs.step, t_wall, t_cpu)):
                w, c = shared._time(fn, args.steps)
                wall.append(w)
                cpu.append(c)
        ow, oc = statistics.median(o_wall), statistics.median(o_cpu)
        tw, tc = statistics.median(t_wall), statistics.median(t_cpu)
        mfu, mfu_cpu = ours.flops / ow / peak, ours.flops / oc / peak_cpu
        print(f"{family:<12}{tokens / ow:>12,.0f}{tokens / tw:>13,.0f}{tw / ow:>6.2f}x"
              f"{tokens / oc:>16,.0f}{tokens / tc:>17,.0f}{tc / oc:>6.2f}x"
              f"{100 * mfu:>6.1f}%{100 * mfu_cpu:>10.1f}%")  # fmt: skip
        del ours, theirs


if __name__ == "__main__":
    main()
