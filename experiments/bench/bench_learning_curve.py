"""Learning curves, ours against the peer: bert-jax's trainer and transformers' BertForPreTraining +
torch.optim.AdamW trained on the same batches in the same order from the same initial weights,
with the same schedule, several seeds each; held-out masked-LM accuracy at several steps, printed
side by side with the seed spread. A benchmark, not a test: it asserts nothing.

  python experiments/bench/bench_learning_curve.py [--sizes tiny,mini] [--seeds 0,1,2] \
      [--steps 1000] [--evals 100,200,300,500,750,1000] [--workdir /tmp/bert-jax-curve] \
      [--out results.json]
  python experiments/bench/bench_learning_curve.py --report a.json,b.json   # merge, print

Each point shows both sides' mean and [min, max] over seeds and the difference of the means with
its 95% interval (Welch's t over seeds).

Data (built once into --workdir, then reused): the embedded English corpus (3 MB, 10% of the
documents held out), a 2000-piece WordPiece vocab, create-pretraining-data shards (sequences of
128, 20 predictions, MLM + NSP, static masks, dupe factor 5), read by our input pipeline into
`batches.npz`: the `--steps` training batches of 32 in their order and every held-out example.
Both sides read that file, so on an accelerator (where the input pipeline's packages may be
missing) `--batches FILE` is all they need.

Recipe (both sides): BERT dropout 0.1 (`--attention_dropout` sets the attention probabilities'),
AdamW (b 0.9/0.999, eps 1e-6, weight decay 0.01 except LayerNorms and biases), global-norm
clip 1.0, peak 1e-3 with linear warmup over 10% of the steps and linear decay (ours
`schedule=linear`, theirs get_linear_schedule_with_warmup), loss = mean masked-LM cross-entropy
+ mean NSP cross-entropy. Seed s draws our initial weights (the peer gets them exported) and each
side's dropout; the data order is the same for every seed. float32 throughout; on a GPU JAX's
matmuls run at `--precision highest` (no TF32), as torch's do by default. `--dtype bfloat16`:
mixed precision on both sides, float32 weights and optimizer state: ours with compute dtype
bfloat16, the peer's forward (training and evaluation) under
torch.autocast(bfloat16), PyTorch's usual recipe.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import statistics
import tempfile
import time

import numpy as np

BATCH, SEQ, PRED, VOCAB_SIZE, CORPUS_MB = 32, 128, 20, 2000, 3.0
KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
        "masked_lm_weights", "next_sentence_labels")  # fmt: skip
SIZES = {"tiny": "L2-H128", "mini": "L4-H256"}


# ---- data ---------------------------------------------------------------------------------------
def prepare(workdir: pathlib.Path, steps: int) -> pathlib.Path:
    """The shards (once) and the batch file for `steps` training steps."""
    out = workdir / f"batches-{steps}.npz"
    if out.exists():
        return out
    from bert_jax.corpus import embedded
    from bert_jax.data.pipeline import create_pretraining_data
    from bert_jax.input import EvalInput, PretrainInput
    from bert_jax.objectives.baselines import masked_lm_baselines
    from bert_jax.tokenization import build_vocab
    from bert_jax.tokenization.vocab import load_vocab

    workdir.mkdir(parents=True, exist_ok=True)
    corpus = workdir / "corpus.txt"
    if not corpus.exists():
        embedded.write_corpus(corpus, max_bytes=int(CORPUS_MB * 2**20))
    docs = corpus.read_text(encoding="utf-8").strip().split("\n\n")
    n_eval = len(docs) // 10
    (workdir / "train.txt").write_text("\n\n".join(docs[:-n_eval]) + "\n", encoding="utf-8")
    (workdir / "eval.txt").write_text("\n\n".join(docs[-n_eval:]) + "\n", encoding="utf-8")
    vocab = workdir / "vocab" / "vocab.txt"
    if not vocab.exists():
        build_vocab([str(workdir / "train.txt")], VOCAB_SIZE, workdir / "vocab")
    for name, dupe in (("train", 5), ("eval", 1)):
        if not (workdir / name / "stats.json").exists():
            create_pretraining_data(str(workdir / f"{name}.txt"), str(workdir / name), str(vocab),
                                    num_shards=1, dupe_factor=dupe, max_seq_length=SEQ,
                                    max_predictions_per_seq=PRED)  # fmt: skip
    train_glob, eval_glob = (str(workdir / n / "shard-*.tfrecord") for n in ("train", "eval"))
    train = PretrainInput(train_glob, BATCH, SEQ, PRED, seed=0)
    batches = [next(train) for _ in range(steps)]
    held_out = [b for b in EvalInput(eval_glob, BATCH, SEQ, PRED)]
    bars = masked_lm_baselines(EvalInput(train_glob, 64, SEQ, PRED),
                               EvalInput(eval_glob, 64, SEQ, PRED),
                               load_vocab(str(vocab))["[MASK]"])  # fmt: skip

    def stack(rows, key, dtype):
        return np.stack([np.asarray(r[key]) for r in rows]).astype(dtype)

    arrays = {}
    for prefix, rows in (("train", batches), ("eval", held_out)):
        for k in KEYS:
            dtype = np.float32 if k == "masked_lm_weights" else np.int32
            arrays[f"{prefix}/{k}"] = stack(rows, k, dtype)
    arrays["eval/example_mask"] = stack(held_out, "example_mask", np.float32)
    meta = {"corpus_sha256": hashlib.sha256(corpus.read_bytes()).hexdigest(),
            "vocab_size": max(load_vocab(str(vocab)).values()) + 1, "baselines": bars}  # fmt: skip
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    tmp = out.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, out)
    return out


def load(path: pathlib.Path) -> tuple[list[dict], list[dict], dict]:
    z = np.load(path)
    meta = json.loads(z["meta"].tobytes())

    def rows(prefix: str) -> list[dict]:
        keys = [k for k in z.files if k.startswith(prefix + "/")]
        n = z[keys[0]].shape[0]
        cols = {k.split("/", 1)[1]: z[k] for k in keys}
        cols.setdefault("example_mask", np.ones((n, BATCH), np.float32))  # training: all real
        return [{k: v[i] for k, v in cols.items()} for i in range(n)]

    return rows("train"), rows("eval"), meta


# ---- the two trainers ---------------------------------------------------------------------------
def _bert_config(size: str, vocab_size: int, dtype: str = "float32", attention_dropout=0.1,
                 hidden_dropout: float = 0.1):  # fmt: skip
    from bert_jax.config import preset

    return preset(SIZES[size], vocab_size=vocab_size, max_position_embeddings=512,
                  hidden_dropout_prob=hidden_dropout,
                  attention_probs_dropout_prob=attention_dropout, dtype=dtype)  # fmt: skip


def _train_config(steps: int, seed: int, learning_rate: float = 1e-3, warmup: int | None = None):
    """AdamW as in the module docstring; `warmup` None = a tenth of the steps."""
    import ml_collections

    from bert_jax.train.config import training_config

    c = training_config()
    c.update(dict(optimizer="adamw", schedule="linear", learning_rate=learning_rate,
                  train_steps=steps, warmup_steps=steps // 10 if warmup is None else warmup,
                  weight_decay=0.01, adam_eps=1e-6, max_grad_norm=1.0, seed=seed))  # fmt: skip
    c.mesh = ml_collections.ConfigDict({"data": 1, "fsdp": 1, "tensor": 1})
    return c


def _correct_and_count(logits_BxPxV: np.ndarray, batch: dict) -> tuple[float, float]:
    w = batch["masked_lm_weights"] * batch.get("example_mask", 1.0)[:, None]
    hit = np.argmax(logits_BxPxV, -1) == batch["masked_lm_ids"]
    return float(np.sum(hit * w)), float(np.sum(w))


def run_ours(size, seed, train, held_out, vocab_size, evals, export_to, dtype="float32",
             attention_dropout=0.1, hidden_dropout=0.1, learning_rate=1e-3,
             warmup=None):  # fmt: skip
    """Trains ours; writes the initial weights to `export_to` (an HF dir; None: not written)
    for the peer (whose attention dropout is then ours: it reads the exported config). The
    batch is the training batches' rows (BATCH unless a caller joined them, e.g.
    experiments/ablations/host_recipe_curve.py); `hidden_dropout`, `learning_rate` and
    `warmup` (None: a tenth of the steps) change the recipe of ours alone, the peer's stays."""
    import jax

    from bert_jax.arch.bert.hf import export_hf
    from bert_jax.pretraining.task import PretrainingTask
    from bert_jax.train import build_trainer, make_mesh

    cfg = _bert_config(size, vocab_size, dtype, attention_dropout, hidden_dropout)
    config = _train_config(len(train), seed, learning_rate, warmup)
    task = PretrainingTask(cfg, len(train[0]["input_ids"]), SEQ, PRED)
    trainer = build_trainer(config, task, make_mesh(config.mesh))
    state = trainer.init_state()
    if export_to is not None:
        export_hf(cfg.replace(dtype="float32"), jax.device_get(state.params), export_to)
    predict = jax.jit(
        lambda p, b: task.model.apply({"params": p}, **task.model_inputs(b)).mlm_logits
    )
    keys = list(trainer.batch_shardings)
    curve, t0 = {}, time.perf_counter()
    for step, batch in enumerate(train, start=1):
        state, _ = trainer.train_step(state, trainer.place_batch({k: batch[k] for k in keys}))
        if step in evals:
            jax.block_until_ready(state.params)
            tally = np.zeros(2)
            for b in held_out:
                logits = np.asarray(predict(state.params, {k: b[k] for k in keys}))
                tally += _correct_and_count(logits, b)
            curve[str(step)] = float(tally[0] / tally[1])  # str: the JSON file's keys
    return curve, time.perf_counter() - t0


def run_peer(hf_dir, seed, train, held_out, evals, device, bf16=False):
    import torch
    import transformers

    def autocast():
        return torch.autocast(device, dtype=torch.bfloat16, enabled=bf16)

    torch.manual_seed(seed)
    model = transformers.BertForPreTraining.from_pretrained(hf_dir, attn_implementation="eager")
    model = model.float().to(device).train()
    named = list(model.named_parameters())
    no_decay = ("bias", "LayerNorm")  # google-research/bert's exclusions
    opt = torch.optim.AdamW(
        [{"params": [p for n, p in named if not any(s in n for s in no_decay)],
          "weight_decay": 0.01},
         {"params": [p for n, p in named if any(s in n for s in no_decay)], "weight_decay": 0.0}],
        lr=1e-3, betas=(0.9, 0.999), eps=1e-6,
    )  # fmt: skip
    sched = transformers.get_linear_schedule_with_warmup(opt, len(train) // 10, len(train))

    def tensors(b):
        t = lambda k: torch.as_tensor(np.asarray(b[k]), dtype=torch.long, device=device)
        return dict(input_ids=t("input_ids"), attention_mask=t("input_mask"),
                    token_type_ids=t("segment_ids"))  # fmt: skip

    def mlm_labels(b):
        labels = np.full(b["input_ids"].shape, -100, np.int64)
        rows, slots = np.nonzero(b["masked_lm_weights"])
        labels[rows, b["masked_lm_positions"][rows, slots]] = b["masked_lm_ids"][rows, slots]
        return torch.as_tensor(labels, device=device)

    curve, t0 = {}, time.perf_counter()
    for step, b in enumerate(train, start=1):
        nsp = torch.as_tensor(np.asarray(b["next_sentence_labels"]).reshape(-1), device=device)
        with autocast():
            out = model(**tensors(b), labels=mlm_labels(b), next_sentence_label=nsp.long())
        loss = out.loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step in evals:
            model.eval()
            tally = np.zeros(2)
            with torch.no_grad(), autocast():
                for e in held_out:
                    logits = model(**tensors(e)).prediction_logits
                    pos = torch.as_tensor(e["masked_lm_positions"], dtype=torch.long,
                                          device=device)  # fmt: skip
                    at = torch.gather(logits, 1, pos[..., None].expand(-1, -1, logits.shape[-1]))
                    tally += _correct_and_count(at.float().cpu().numpy(), e)
            curve[str(step)] = float(tally[0] / tally[1])
            model.train()
    return curve, time.perf_counter() - t0


# ---- report -------------------------------------------------------------------------------------
def _spread(values: list[float]) -> str:
    return f"{statistics.mean(values):.4f} [{min(values):.4f}, {max(values):.4f}]"


NO_INTERVAL = "(no interval: one seed a side, or no spread)"


def difference_interval(
    ours: list[float], peer: list[float]
) -> tuple[float, float | None, float | None]:
    """Mean difference ours - peer and its 95% interval over seeds (Welch's t); the interval is
    None when a side has a single seed (its variance is undefined) or neither side varies."""
    from scipy import stats

    diff = statistics.mean(ours) - statistics.mean(peer)
    if min(len(ours), len(peer)) < 2:
        return diff, None, None
    va, vb = statistics.variance(ours) / len(ours), statistics.variance(peer) / len(peer)
    if va + vb == 0:
        return diff, None, None
    dof = (va + vb) ** 2 / (va**2 / (len(ours) - 1) + vb**2 / (len(peer) - 1))
    half = float(stats.t.ppf(0.975, dof)) * (va + vb) ** 0.5
    return diff, diff - half, diff + half


def report(results: dict, evals: list[int], meta: dict) -> str:
    bars = meta["baselines"]
    lines = [f"held-out masked-LM accuracy, mean [min, max] over seeds; unigram "
             f"{bars['unigram']:.4f}, context-free {bars['unigram_or_copy']:.4f}"]  # fmt: skip
    for size, by_side in results.items():
        seeds = sorted(r["seed"] for r in by_side["ours"])
        lines += ["", f"{size} ({SIZES[size]}), seeds {seeds}",
                  "| step | ours | transformers + torch AdamW | ours - peer, 95% interval | "
                  "ours' mean in the peer's range |", "|---|---|---|---|---|"]  # fmt: skip
        for step in evals:
            ours = [r["curve"][str(step)] for r in by_side["ours"]]
            peer = [r["curve"][str(step)] for r in by_side["peer"]]
            diff, lo, hi = difference_interval(ours, peer)
            inside = min(peer) <= statistics.mean(ours) <= max(peer)
            interval = f"[{lo:+.4f}, {hi:+.4f}]" if lo is not None else NO_INTERVAL
            lines.append(
                f"| {step} | {_spread(ours)} | {_spread(peer)} | "
                f"{diff:+.4f} {interval} | {'yes' if inside else 'no'} |"
            )
        t_ours = statistics.mean(r["seconds"] for r in by_side["ours"])
        t_peer = statistics.mean(r["seconds"] for r in by_side["peer"])
        lines.append(f"wall per run (training + evaluations, first one compiling): ours "
                     f"{t_ours:.0f} s, peer {t_peer:.0f} s")  # fmt: skip
    return "\n".join(lines)


def merged(paths: list[str]) -> tuple[dict, dict]:
    """Results of several `--out` files (e.g. more seeds run later) as one."""
    meta, results = None, {}
    for path in paths:
        data = json.loads(pathlib.Path(path).read_text())
        if meta is not None and data["meta"]["corpus_sha256"] != meta["corpus_sha256"]:
            raise SystemExit(f"{path}: trained on other data than {paths[0]}")
        meta = data["meta"]
        for size, sides in data["results"].items():
            for side, runs in sides.items():
                results.setdefault(size, {}).setdefault(side, []).extend(runs)
    return results, meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="tiny,mini")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--evals", default="100,200,300,500,750,1000")
    ap.add_argument("--workdir", default="/tmp/bert-jax-curve")
    ap.add_argument("--batches", default="", help="a batch file from an earlier --workdir")
    ap.add_argument("--precision", default="highest", help="jax_default_matmul_precision")
    ap.add_argument("--dtype", default="float32", help="compute dtype: float32 or bfloat16")
    ap.add_argument("--out", default="", help="also write the results as JSON here")
    ap.add_argument("--attention_dropout", type=float, default=0.1,
                    help="both sides' dropout on attention probabilities (0: the fused path)")
    ap.add_argument("--report", default="", help="only print the table of these --out files")
    args = ap.parse_args()
    evals = [int(s) for s in args.evals.split(",") if int(s) <= args.steps]
    if args.report:
        results, meta = merged(args.report.split(","))
        print(report(results, evals, meta))
        return
    os.environ.setdefault("JAX_PLATFORMS", "")
    import jax
    import torch

    jax.config.update("jax_default_matmul_precision", args.precision)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    path = pathlib.Path(args.batches) if args.batches else prepare(pathlib.Path(args.workdir),
                                                                   args.steps)  # fmt: skip
    train, held_out, meta = load(path)
    meta["attention_dropout"] = args.attention_dropout
    train = train[: args.steps]
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; torch {torch.__version__} "
          f"on {device}; {len(train)} steps of {BATCH} x {SEQ}; {len(held_out)} held-out "
          f"batches; corpus sha256 {meta['corpus_sha256'][:12]}; {args.dtype}",
          flush=True)  # fmt: skip
    results: dict = {}
    for size in args.sizes.split(","):
        results[size] = {"ours": [], "peer": []}
        for seed in (int(s) for s in args.seeds.split(",")):
            with tempfile.TemporaryDirectory() as hf_dir:
                curve, secs = run_ours(size, seed, train, held_out, meta["vocab_size"], evals,
                                       hf_dir, args.dtype, args.attention_dropout)  # fmt: skip
                results[size]["ours"].append({"seed": seed, "curve": curve, "seconds": secs})
                peer, psecs = run_peer(hf_dir, seed, train, held_out, evals, device,
                                       args.dtype == "bfloat16")  # fmt: skip
                results[size]["peer"].append({"seed": seed, "curve": peer, "seconds": psecs})
            print(f"{size} seed {seed}: ours {curve} ({secs:.0f} s); peer {peer} ({psecs:.0f} s)",
                  flush=True)  # fmt: skip
            if args.out:
                pathlib.Path(args.out).write_text(json.dumps({"meta": meta, "results": results}))
    print()
    print(report(results, evals, meta))


if __name__ == "__main__":
    main()
