"""ELECTRA's generator and discriminator at each checkpoint its pretraining runs kept.

    python experiments/ablations/electra_along_training.py --workdir W [--scale cpu]
        [--pretrain_seeds 2]

W is a workdir where `bert-jax ablate --table electra` has pretrained (the same --scale). For
every ELECTRA pretraining run there (one per pretraining seed), each kept checkpoint (every
quarter of the run) is evaluated with the trainer's own held-out evaluation, on the same
batches, and printed as one markdown row: the generator where the input hides the original
against the unigram rate, the discriminator's accuracy against always answering "original",
its loss against the best constant answer's, and its ROC AUC (0.5: it does not rank replaced
tokens above originals) against a detector that sees each token alone: its rate of being
replaced, counted on training batches corrupted by the same checkpoint's generator. A
discriminator above that bar uses context. Results are cached in each run's
along_training.json; the last step reproduces the run's done.json. Seconds per checkpoint at
the cpu scale.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import jax
import numpy as np

from bert_jax.ablations import tables
from bert_jax.ablations.checks import along_training, binary_entropy, masked_lm_check
from bert_jax.ablations.harness import Harness
from bert_jax.ablations.run import scale_for, seeded

COLUMNS = ("run", "step", "generator, hidden positions", "unigram", "discriminator",
           "always original", "discriminator loss", "constant's loss", "discriminator AUC",
           "token-alone loss", "token-alone AUC")  # fmt: skip
TRAIN_BATCHES = 50  # 50 x 32 x 128 tokens: about 50 per vocabulary entry at the cpu scale


def token_alone(task: Any, trainer: Any, params: Any) -> dict[str, float]:
    """The discriminator's bars without context: each (corrupted) held-out token scored by how
    often that token was a replacement on `TRAIN_BATCHES` training batches, as a ROC AUC and
    as the log loss of that rate. The corruption is the evaluation's own (the same generator
    sampling key)."""
    from sklearn.metrics import log_loss, roc_auc_score

    rngs = task.family.pretraining_rngs(jax.random.PRNGKey(0), True)

    @jax.jit
    def corrupt(params: Any, batch: dict) -> tuple[jax.Array, jax.Array]:
        out = task.model.apply({"params": params}, **task.model_inputs(batch),
                               deterministic=True, rngs=rngs)  # fmt: skip
        return out.sampled_ids, out.replaced

    def tokens(batches: Iterable[dict]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for batch in batches:
            host = jax.device_get(batch)
            inputs = {k: batch[k] for k in trainer.batch_shardings}
            sampled_BxP, replaced_BxL = jax.device_get(corrupt(params, inputs))
            ids_BxL = np.array(host["input_ids"])
            b, p = np.nonzero(np.asarray(host["masked_lm_weights"]) > 0)
            ids_BxL[b, np.asarray(host["masked_lm_positions"])[b, p]] = sampled_BxP[b, p]
            real_BxL = np.asarray(host["input_mask"]) > 0
            if "example_mask" in host:
                real_BxL &= np.asarray(host["example_mask"])[:, None] > 0
            yield ids_BxL[real_BxL], np.asarray(replaced_BxL)[real_BxL]

    vocab = task.bert_config.vocab_size
    seen, replaced = np.zeros(vocab), np.zeros(vocab)
    for ids, labels in tokens(itertools.islice(task.train_input(trainer), TRAIN_BATCHES)):
        np.add.at(seen, ids, 1.0)
        np.add.at(replaced, ids, labels.astype(np.float64))
    prior = replaced.sum() / seen.sum()  # unseen tokens get the overall rate
    rate = (replaced + prior) / (seen + 1.0)
    held = list(tokens(itertools.islice(task.eval_input(trainer), task.max_eval_steps)))
    ids = np.concatenate([i for i, _ in held])
    labels = np.concatenate([y for _, y in held])
    return {"token_alone_auc": float(roc_auc_score(labels, rate[ids])),
            "token_alone_loss": float(log_loss(labels, rate[ids]))}  # fmt: skip


def rows(h: Harness, pretrain_seeds: int) -> list[list[str]]:
    out = []
    for arm in tables.get("electra").arms(h.scale):
        if arm.pretrain.objective != "electra":
            continue
        for p in range(pretrain_seeds):
            run = seeded(arm, p).pretrain
            unigram = masked_lm_check(h, run)["unigram"]
            for step, m in along_training(h, run, token_alone).items():
                cells = [m.get("eval_masked_lm_hidden_accuracy"), unigram,
                         m["eval_replaced_token_accuracy"], m["eval_replaced_token_baseline"],
                         m["eval_replaced_token_loss"],
                         binary_entropy(m["eval_replaced_token_fraction"]),
                         m.get("eval_replaced_token_auc"), m["token_alone_loss"],
                         m["token_alone_auc"]]  # fmt: skip
                shown = ["" if v is None else f"{v:.4f}" for v in cells]
                out.append([f"{arm.name}, pretraining seed {p}", str(step), *shown])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--pretrain_seeds", type=int, default=2)
    args = ap.parse_args()
    h = Harness(args.workdir, scale_for(args.scale), progress=lambda _: None)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|---" * len(COLUMNS) + "|")
    for row in rows(h, args.pretrain_seeds):
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
