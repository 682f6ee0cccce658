"""Feature-based NER: frozen ELMo layers vs frozen BERT layers at the same size and token budget
(the comparison behind BERT's Table 7), on the offline suite's `conll` task.

    python experiments/elmo_vs_bert_ner.py --workdir /tmp/elmo_vs_bert            # ~30 min, 2 cores
    python experiments/elmo_vs_bert_ner.py --workdir /tmp/t --steps 4 --seeds 1 --quick

Both LMs read the same text: the ablation harness's split of the embedded corpus (every tenth
document held out; pretraining text from the rest), for `--steps` steps of `--batch` windows of
`--seq` tokens (WordPieces for BERT, words for ELMo). BERT is pretrained by the harness (MLM, no
NSP, dynamic masking, `bert_jax.runs.pretrain`); ELMo's biLM by `bert_jax.arch.elmo.lm` through
the same loop with the same optimiser, lr schedule and steps. Each frozen model then feeds the same
2-layer BiLSTM tagger (`--lstm_size`), trained `--tagger_epochs` on the suite's conll task
(words replaced by a random corpus word are B-MISC; dev from held-out documents) for `--seeds`
seeds: BERT as in Table 7 (concat of the last four layers, `bert_jax.tasks.feature_ner`), ELMo
through its scalar mix. "random" arms use the untrained models. Prints and writes
`<workdir>/elmo_vs_bert_ner_<tagger settings>.json`: per arm the per-seed entity F1 x 100
(seqeval, as the `ner` task scores), median and std, and each LM's size and held-out metrics. A
rerun in the same workdir reuses both pretrained LMs (e.g. to try another tagger budget).
Expect small numbers at CPU scale: the task needs hundreds of tagger steps even from a strong
encoder.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.ablations.harness import Harness
from bert_jax.ablations.run import _share_compiled_steps
from bert_jax.ablations.scales import SCALES
from bert_jax.ablations.tables import Pretrain
from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.arch.elmo import lm as elmo_lm
from bert_jax.arch.elmo import ner as elmo_ner
from bert_jax.arch.elmo.model import ElmoBiLM, ElmoConfig
from bert_jax.atomic_write import write_json_atomic
from bert_jax.corpus import embedded
from bert_jax.runs.finetune import predict, run_config
from bert_jax.tasks import feature_ner, ner
from bert_jax.tasks.arrays import TrainBatches, eval_batches
from bert_jax.tokenization import FullTokenizer
from bert_jax.train.config import finetune_config, pretrain_config
from bert_jax.train.loop import train

ONE_DEVICE = {"data": 1, "fsdp": 1, "tensor": 1}


def read_docs(path: str) -> list[list[str]]:
    """The documents of a text file the harness wrote (a blank line between documents)."""
    blocks = pathlib.Path(path).read_text(encoding="utf-8").split("\n\n")
    return [lines for b in blocks if (lines := [x.strip() for x in b.splitlines() if x.strip()])]


def n_params(tree: Any) -> int:
    return int(sum(np.size(x) for x in jax.tree.leaves(tree)))


def elmo_next_word_accuracy(cfg: ElmoConfig, params: Any, arrays: dict[str, np.ndarray]) -> float:
    """Held-out top-1 accuracy of the forward LM (next word), over real targets."""
    model = ElmoBiLM(cfg)

    @jax.jit
    def hits(ids, mask):
        pred = model.apply({"params": params}, ids, mask)[0][:, :-1].argmax(-1)
        w = mask[:, 1:]
        return jnp.sum((pred == ids[:, 1:]) * w), jnp.sum(w)

    out = [hits(b["input_ids"], b["input_mask"]) for b, _ in eval_batches(arrays, 32)]
    return float(sum(h for h, _ in out) / sum(n for _, n in out))


def train_elmo(
    args: argparse.Namespace,
    bert_cfg: Any,
    train_docs: list[list[str]],
    eval_docs: list[list[str]],
    workdir: str,
) -> dict[str, Any]:
    """ELMo's biLM on the same text with BERT's optimiser, schedule, steps and batch."""
    vocab = elmo_lm.build_vocab(train_docs, args.vocab_size)
    tr = elmo_lm.windows(train_docs, vocab, args.seq)
    ev = elmo_lm.windows(eval_docs, vocab, args.seq)
    ev = {k: v[: args.eval_windows] for k, v in ev.items()}
    cfg = ElmoConfig(len(vocab), dim=args.elmo_dim, hidden=args.elmo_hidden)
    task = elmo_lm.ElmoLMTask(cfg, args.batch, args.seq, eval_arrays=ev)
    c = pretrain_config(args.model)
    keys = ("learning_rate", "warmup_steps", "schedule", "train_steps", "global_batch_size",
            "weight_decay", "seed", "eval_every_steps", "log_every_steps")  # fmt: skip
    c.update({k: bert_cfg[k] for k in keys})
    c.update(dict(dtype="float32", checkpoint_every_steps=args.steps, async_checkpoints=False))
    c.mesh.update(ONE_DEVICE)
    params, held = {}, {}
    if args.steps:
        result = train(c, task, workdir, batches=TrainBatches(tr, args.batch, seed=0))
        params["trained"] = jax.device_get(result.state.params)
        # A rerun resumes the finished run and trains no step (so no eval): evaluate here.
        held = dict(result.last_eval) or {
            f"eval_{k}": v for k, v in task.evaluate(result.trainer, result.state.params).items()
        }
        held["eval_forward_accuracy"] = elmo_next_word_accuracy(cfg, params["trained"], ev)
    random_params = ElmoBiLM(cfg).init(jax.random.PRNGKey(0), tr["input_ids"][:1],
                                       tr["input_mask"][:1])["params"]  # fmt: skip
    if not args.skip_random:
        params["random"] = jax.device_get(random_params)
    held["unigram_perplexity"] = elmo_lm.unigram_perplexity(tr, ev, len(vocab))
    held["train_windows"] = len(tr["input_ids"])
    held["oov_rate"] = float((tr["input_ids"] == elmo_lm.UNK).sum() / tr["input_mask"].sum())
    return {"config": cfg, "vocab": vocab, "params": params, "held_out": held,
            "num_params": n_params(random_params)}  # fmt: skip


def tagger_f1(
    task: Any,
    rows: dict[str, np.ndarray],
    dev: dict[str, np.ndarray],
    sents: list[ner.Sentence],
    windows: list[ner.Window],
    args: argparse.Namespace,
    seed: int,
    workdir: str,
) -> float:
    """Entity F1 x 100 on the dev sentences after training `task` on `rows` with `seed`."""
    c = finetune_config("ner")
    c.update(dict(dtype="float32", checkpoint_every_steps=10**9, log_every_steps=10**6,
                  async_checkpoints=False, num_devices=1))  # fmt: skip
    c.mesh.update(ONE_DEVICE)
    n_train = args.suite_train_sentences
    c = run_config(c, n_train, args.tagger_lr, args.tagger_epochs, args.tagger_batch, seed)
    result = train(c, task, workdir, batches=TrainBatches(rows, args.tagger_batch, seed))
    logits = predict(result.trainer, result.state.params, dev, 64)
    pred = ner.word_predictions(sents, windows, logits.argmax(-1))
    ner.write_predictions(sents, pred, f"{workdir}/dev_predictions.txt")  # word gold predicted
    return 100.0 * ner.entity_f1([list(s.tags) for s in sents], pred)["f1"]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", required=True)
    p.add_argument("--model", default="L2-H128-A2")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--vocab_size", type=int, default=4000)
    p.add_argument("--corpus_bytes", type=int, default=3_000_000)
    p.add_argument("--elmo_dim", type=int, default=64)
    p.add_argument("--elmo_hidden", type=int, default=192)
    p.add_argument("--suite_train", type=int, default=2000)
    p.add_argument("--suite_dev", type=int, default=500)
    p.add_argument("--lstm_size", type=int, default=128)
    p.add_argument("--tagger_epochs", type=float, default=5.0)
    p.add_argument("--tagger_lr", type=float, default=1e-3)
    p.add_argument("--tagger_batch", type=int, default=32)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--eval_windows", type=int, default=640)
    p.add_argument("--max_documents", type=int, default=0, help="0 = the whole embedded corpus")
    p.add_argument("--skip_random", action="store_true", help="no untrained-model arms")
    p.add_argument("--quick", action="store_true", help="a few-minute wiring check")
    args = p.parse_args(argv)
    if args.quick:
        args.model, args.vocab_size, args.corpus_bytes = "L1-H32-A2", 600, 120_000
        args.seq, args.batch = 32, 8
        args.elmo_dim, args.elmo_hidden, args.suite_train, args.suite_dev = 32, 32, 48, 24
        args.lstm_size, args.tagger_epochs, args.tagger_batch, args.eval_windows = 8, 1.0, 8, 16
    t0 = time.time()
    _share_compiled_steps(args.workdir)
    scale = dataclasses.replace(
        SCALES["cpu"], model=args.model, steps=args.steps, seq=args.seq, batch=args.batch,
        predictions=max(1, round(0.15 * args.seq)), learning_rate=args.lr,
        warmup=args.steps // 10, vocab_size=args.vocab_size, corpus_bytes=args.corpus_bytes,
        dupe_factor=1, suite_train=args.suite_train, suite_dev=args.suite_dev,
        eval_steps=max(1, args.eval_windows // args.batch),
    )  # fmt: skip
    corpus = ""
    if args.max_documents:  # the first documents of the embedded corpus, as a text file
        corpus = f"{args.workdir}/corpus.txt"
        docs = embedded.iter_documents(max_documents=args.max_documents)
        pathlib.Path(args.workdir).mkdir(parents=True, exist_ok=True)
        pathlib.Path(corpus).write_text("\n".join("\n".join(d) + "\n" for d in docs))
    h = Harness(args.workdir, scale, corpus, progress=lambda m: print(m, flush=True))
    out: dict[str, Any] = {"args": vars(args), "lm": {}, "arms": {}, "seconds": {}}

    # --- pretraining: BERT through the harness, ELMo through the same loop on the same text ---
    bert_run = Pretrain("mlm", args.model, args.steps)
    bert_cfg = h.pretrain_config(bert_run)
    wd = {"trained": h.pretrain(bert_run)}
    if not args.skip_random:
        wd["random"] = h.pretrain(Pretrain("mlm", args.model, 0))
    out["seconds"]["bert_pretrain"] = time.time() - t0
    train_txt, eval_txt = (str(h.root / "data" / f) for f in ("train.txt", "eval.txt"))
    t1 = time.time()
    elmo = train_elmo(args, bert_cfg, read_docs(train_txt), read_docs(eval_txt),
                      str(h.root / "elmo"))  # fmt: skip
    out["seconds"]["elmo_pretrain"] = time.time() - t1
    bert = {k: load_pretrained(str(v)) for k, v in wd.items()}
    held = json.loads((wd["trained"] / "done.json").read_text())
    out["lm"]["bert"] = {
        "num_params": n_params(bert["trained"].params),
        "encoder_params": n_params(bert["trained"].params["bert"]),
        "eval_masked_lm_accuracy": held["eval_masked_lm_accuracy"],
        "eval_masked_lm_perplexity": math.exp(held["eval_masked_lm_loss"]),
    }
    out["lm"]["elmo"] = {
        "num_params": elmo["num_params"], "dim": args.elmo_dim, "hidden": args.elmo_hidden,
        **elmo["held_out"],
    }  # fmt: skip

    # --- the suite's conll task, featurised for each model family ---
    conll = h.task_dir("conll")
    train_s, dev_s = ner.read_conll(f"{conll}/train.txt"), ner.read_conll(f"{conll}/valid.txt")
    args.suite_train_sentences = len(train_s)
    lower = bert["trained"].do_lower_case is not False
    tok = FullTokenizer(str(bert["trained"].vocab_file), do_lower_case=lower)
    b_tr, _ = ner.featurize(train_s, tok, args.seq)
    b_dev, b_win = ner.featurize(dev_s, tok, args.seq)
    e_tr, _ = elmo_ner.featurize(train_s, elmo["vocab"], args.seq)
    e_dev, e_win = elmo_ner.featurize(dev_s, elmo["vocab"], args.seq)
    labels = ("input_mask", "labels", "label_weights")
    t2 = time.time()
    for which in bert:
        bert_c = bert[which].config
        feats = {name: feature_ner.last_four_layers(bert_c, bert[which].params["bert"], a)
                 for name, a in (("train", b_tr), ("dev", b_dev))}  # fmt: skip
        rows = {"train": {**{k: b_tr[k] for k in labels}, "features": feats["train"]},
                "dev": {**{k: b_dev[k] for k in labels}, "features": feats["dev"]}}  # fmt: skip
        task = feature_ner.FeatureTaggingTask(
            feats["train"].shape[-1], len(ner.LABELS), args.tagger_batch, args.seq, args.lstm_size
        )
        arms = {f"BERT {which}": (task, rows, b_win)}
        ep = elmo["params"].get(which)
        if ep is not None:
            ef = {name: elmo_lm.layer_features(elmo["config"], ep, a)
                  for name, a in (("train", e_tr), ("dev", e_dev))}  # fmt: skip
            erows = {"train": {**{k: e_tr[k] for k in labels}, "features": ef["train"]},
                     "dev": {**{k: e_dev[k] for k in labels}, "features": ef["dev"]}}  # fmt: skip
            etask = elmo_ner.ElmoTaggingTask(ef["train"].shape[-1], len(ner.LABELS),
                                             args.tagger_batch, args.seq, args.lstm_size,
                                             num_layers=ef["train"].shape[1])  # fmt: skip
            arms[f"ELMo {which}"] = (etask, erows, e_win)
        tag = f"ep{args.tagger_epochs:g}_lr{args.tagger_lr:g}_lstm{args.lstm_size}"
        for arm, (t, r, win) in arms.items():
            runs = [str(h.root / "tagger" / tag / arm.replace(" ", "_") / f"seed{s}")
                    for s in range(args.seeds)]  # fmt: skip
            f1s = [tagger_f1(t, r["train"], r["dev"], dev_s, win, args, s, run)
                   for s, run in enumerate(runs)]  # fmt: skip
            out["arms"][arm] = {
                "f1": f1s, "median": float(np.median(f1s)), "runs": runs,
                "std": float(np.std(f1s, ddof=1)) if len(f1s) > 1 else 0.0,
                "tagger_input_width": int(r["train"]["features"].shape[-1]),
            }  # fmt: skip
            print(arm, out["arms"][arm], flush=True)
    out["seconds"]["taggers"] = time.time() - t2
    out["seconds"]["total"] = time.time() - t0
    out["dev"] = {"sentences": len(dev_s), "entities": sum(t != "O" for s in dev_s for t in s.tags)}
    write_json_atomic(h.root / f"elmo_vs_bert_ner_{tag}.json", out, sort_keys=True)
    print(json.dumps({k: out[k] for k in ("lm", "seconds")}, indent=1, default=str))
    return out


if __name__ == "__main__":
    main()
