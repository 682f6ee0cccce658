"""ELECTRA's generator and discriminator at each checkpoint its pretraining runs kept.

    python experiments/ablations/electra_along_training.py --workdir W [--scale cpu]
        [--pretrain_seeds 2] [--steps N --pretrain]

W is a workdir where `bert-jax ablate --table electra` has pretrained (the same --scale), or
where `--pretrain` trains the ELECTRA runs of `--steps` (a longer run: the steps the
discriminator needs; the run is the one `bert-jax ablate --table electra --steps N` would
fine-tune, and a killed one resumes; a checkpoint is kept every quarter). For
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

from etils import epath

from bert_jax.ablations import tables
from bert_jax.ablations.checks import along_training, binary_entropy, masked_lm_check
from bert_jax.ablations.harness import Harness
from bert_jax.ablations.run import scale_for
from bert_jax.ablations.token_alone import token_alone_bars
from bert_jax.ablations.unit_jobs import seeded

COLUMNS = ("run", "step", "generator, hidden positions", "unigram", "discriminator",
           "always original", "discriminator loss", "constant's loss", "discriminator AUC",
           "token-alone loss", "token-alone AUC")  # fmt: skip


def rows(h: Harness, pretrain_seeds: int, train: bool) -> list[list[str]]:
    out = []
    for arm in tables.get("electra").arms(h.scale):
        if arm.pretrain.objective != "electra":
            continue
        for p in range(pretrain_seeds):
            run = seeded(arm, p).pretrain
            if not (h.root / "pretrain" / run.key / "done.json").exists():
                if not train:
                    raise SystemExit(f"{h.root / 'pretrain' / run.key}: not pretrained; "
                                     "--pretrain trains it (resumable)")  # fmt: skip
                print(f"pretraining {run.key}", flush=True)
                h.pretrain(run)
            unigram = masked_lm_check(h, run)["unigram"]
            for step, m in along_training(h, run, token_alone_bars).items():
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
    ap.add_argument("--steps", type=int, default=0, help="the runs' length (0: the scale's)")
    ap.add_argument("--pretrain", action="store_true", help="pretrain the runs not made yet")
    args = ap.parse_args()
    if not (epath.Path(args.workdir) / "settings.json").exists():  # not a typo'd new one
        raise SystemExit(f"{args.workdir}: not an ablation workdir (no settings.json); give "
                         "the one `bert-jax ablate --table electra` used")  # fmt: skip
    scale = scale_for(args.scale, steps=args.steps)
    h = Harness(args.workdir, scale, progress=lambda _: None)
    table = rows(h, args.pretrain_seeds, args.pretrain)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|---" * len(COLUMNS) + "|")
    for row in table:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
