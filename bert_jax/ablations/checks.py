"""What a pretraining run learned, scored on the model itself: held-out masked-LM perplexity
and the sentence heads' accuracy (the intrinsic tasks), and each run against its no-context bar
(masked LM: the context-free predictor; left-to-right LM: the next-token unigram rate; ELECTRA:
its generator where the input hides the original, and its discriminator against always
"original"). The bars are computed once per run and kept in its baselines.json."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath

from bert_jax import objectives
from bert_jax.ablations import stats
from bert_jax.ablations.layout import require_checkpoint
from bert_jax.ablations.tables import Arm, Pretrain
from bert_jax.arch import registry
from bert_jax.arch.bert.pretrained import graft_encoder
from bert_jax.atomic_write import write_json_atomic
from bert_jax.checkpoint import restore_params
from bert_jax.pretraining.task import bert_config_from, pretraining_task
from bert_jax.train import build_trainer, make_mesh

# `h` below is the ablation harness (bert_jax.ablations.harness.Harness, which imports this
# module): typed Any so that the import layers stay acyclic.
Harness = Any


# Intrinsic tasks scored per held-out pair, so that arms compare on the same pairs.
PAIR_TASKS = ("nsp", "sop")


def intrinsic(h: Harness, arm: Arm, task: str) -> float:
    """`mlm_ppl`: exp of the held-out masked-LM loss; `nsp` / `sop`: accuracy x 100 of the
    model's own sentence head on held-out NSP / SOP pairs (`pair_rows`). Either's rows are
    made here, while the checkpoint is at hand: they are what makes the job finished
    (`rows_file`)."""
    if task == "mlm_ppl":
        masked_lm_loss_rows(h, arm.pretrain)
        final = json.loads((h.pretrain(arm.pretrain) / "done.json").read_text())
        return math.exp(final["eval_masked_lm_loss"])
    return 100.0 * float(pair_rows(h, arm, task).mean())


def pair_rows(h: Harness, arm: Arm, task: str) -> np.ndarray:
    """N x 1: 1 where the model's own sentence head is right on held-out NSP / SOP pair n (a
    model pretrained without one gets a freshly initialised head: chance by construction, as
    ALBERT's "none" row). The pairs are all of the held-out shards' (not only the first
    `max_eval_steps` batches that the pretraining run's own evaluation reads), in order, the
    same for every arm, so the rows feed the paired bootstrap (stats.py). Kept with the gold
    labels in the run's pair_rows_<task>.json."""
    scored = json.loads(_scored_pairs(h, arm, task).read_text())
    return np.asarray(scored["correct"], np.float64)[:, None]


LOSS_ROWS = "mlm_loss_rows.npz"


def rows_file(run_dir: epath.Path, task: str) -> epath.Path:
    """Where a finished pretraining run keeps an intrinsic task's rows: a unit carries these,
    not the checkpoint they are made from, so without them the task cannot be scored."""
    return run_dir / (LOSS_ROWS if task == "mlm_ppl" else f"pair_rows_{task}.json")


def masked_lm_loss_rows(h: Harness, run: Pretrain) -> np.ndarray:
    """N x 2: [masked-LM loss summed over the sequence's predictions, its predictions] of each
    real held-out sequence that the run's own evaluation reads (the first `max_eval_steps`
    batches, with its masks), from its last checkpoint: the ratio of the column sums is its
    eval_masked_lm_loss. Every arm reads the same sequences, so Table 6's arms are compared
    sequence by sequence (interval.py). Kept in the run's mlm_loss_rows.npz."""
    from bert_jax.checkpoint import Checkpointer

    wd = h.pretrain(run)

    def compute() -> np.ndarray:
        require_checkpoint(wd, f"{LOSS_ROWS}, not made yet,")
        task, trainer = _one_device_trainer(h, run)
        ckpt = Checkpointer(wd / "checkpoints", read_only=True, async_save=False)
        try:
            state, _ = ckpt.restore(trainer.abstract_state(), max(ckpt.all_steps()))
        finally:
            ckpt.close()
        keys, rows = list(trainer.batch_shardings), []
        for batch in itertools.islice(task.eval_input(trainer), task.max_eval_steps):
            host = jax.device_get(batch)
            for i in np.flatnonzero(np.asarray(host["example_mask"]) > 0):
                one = {k: host[k][i : i + 1] for k in keys}
                metrics = jax.device_get(trainer.eval_step(state.params, one))
                predictions = task.spec.predicted_tokens(one)
                rows.append([float(metrics["masked_lm_loss"]) * predictions, predictions])
        return np.asarray(rows, np.float64)

    return stats.cached_rows(wd / LOSS_ROWS, compute)


def _one_device_trainer(h: Harness, run: Pretrain) -> tuple[Any, Any]:
    """The run's pretraining task and a one-device trainer for it, to evaluate its checkpoints
    on its held-out shards."""
    c = h.pretrain_config(run)
    task = pretraining_task(c, bert_config_from(c))
    return task, build_trainer(c, task, make_mesh(c.mesh, jax.devices()[:1]))


def _scored_pairs(h: Harness, arm: Arm, task: str) -> epath.Path:
    """pair_rows_<task>.json of the arm's run ({"labels", "correct"}), made on first use."""
    wd = h.pretrain(arm.pretrain)
    cached = rows_file(wd, task)
    if not cached.exists():
        require_checkpoint(wd, f"{cached.name}, not made yet,")
        objective = {"nsp": "mlm_nsp", "sop": "mlm_sop"}[task]
        cfg = h.pretrain_config(dataclasses.replace(arm.pretrain, objective=objective))
        bert_config, params = restore_params(str(wd))
        eval_task = pretraining_task(cfg, bert_config)
        trainer = build_trainer(cfg, eval_task, make_mesh(cfg.mesh, jax.devices()[:1]))
        params = graft_encoder(trainer.init_state().params, params)

        @jax.jit
        def predict(params: Any, batch: dict) -> jax.Array:
            out = eval_task.model.apply({"params": params}, **eval_task.model_inputs(batch),
                                        deterministic=True)  # fmt: skip
            return jnp.argmax(out.nsp_logits, -1)

        labels: list[int] = []
        correct: list[int] = []
        for batch in eval_task.eval_input(trainer):
            host = jax.device_get(batch)
            real_B = np.asarray(host["example_mask"]).astype(bool)
            gold_B = np.asarray(host["next_sentence_labels"]).reshape(-1)[real_B]
            inputs = {k: batch[k] for k in trainer.batch_shardings}
            pred_B = np.asarray(jax.device_get(predict(params, inputs))).reshape(-1)[real_B]
            labels += gold_B.tolist()
            correct += (pred_B == gold_B).astype(int).tolist()
        write_json_atomic(cached, {"labels": labels, "correct": correct})
    return cached


def pair_constant(h: Harness, arm: Arm, task: str) -> tuple[dict, np.ndarray]:
    """The best constant answer on the held-out pairs `pair_rows` scores: its baseline entry
    (x 100; label 1 = random next / swapped, 0 = the text's own order; `majority` is the same
    number, the pairs have no other split) and its N x 1 correctness per pair. A fresh head
    often gives every pair one label, so the "none" arm sits at it or at its complement."""
    labels = np.asarray(json.loads(_scored_pairs(h, arm, task).read_text())["labels"])
    ones = 100.0 * float(labels.sum()) / len(labels)
    best, answer = max((100.0 - ones, 0), (ones, 1))
    baseline = {"majority": best, "best_constant": best, "constant_answer": str(answer)}
    return baseline, (labels == answer).astype(np.float64)[:, None]


def _next_token_check(h: Harness, run: Pretrain) -> dict:
    """A left-to-right LM's held-out next-token accuracy against always answering the most
    frequent training token (`bert_jax.objectives.baselines.next_token_baselines`)."""
    from bert_jax.input import EvalInput
    from bert_jax.objectives.baselines import next_token_baselines

    wd = h.pretrain(run)
    cached = wd / "baselines.json"
    if not cached.exists():
        c = h.pretrain_config(run)

        def batches(files: str, n: int):
            data = EvalInput(files, c.global_batch_size, c.max_seq_length,
                             c.max_predictions_per_seq, objective=c.objective)  # fmt: skip
            return itertools.islice(iter(data), n)

        base = next_token_baselines(batches(c.train_files, 200),
                                    batches(c.eval_files, c.max_eval_steps))  # fmt: skip
        write_json_atomic(cached, base, sort_keys=True)
    final = json.loads((wd / "done.json").read_text())
    return {"lm_accuracy": final["eval_lm_accuracy"],
            "unigram": json.loads(cached.read_text())["unigram"]}  # fmt: skip


def binary_entropy(p: float) -> float:
    """The sigmoid cross-entropy (nats) of the best constant answer when a fraction `p` of the
    tokens is replaced: a discriminator below it has learned something, even while its
    accuracy at 0.5 stays at always answering "original"."""
    if not 0.0 < p < 1.0:
        return 0.0
    return float(-(p * math.log(p) + (1.0 - p) * math.log(1.0 - p)))


def masked_lm_check(h: Harness, run: Pretrain) -> dict | None:
    """A masked-LM run's held-out accuracy next to the context-free predictors' on the same
    masks (bert_jax.objectives.baselines): above `context_free`, the model uses context.
    A left-to-right LM's is its next-token accuracy against the next-token unigram rate;
    None for random init and XLNet. ELECTRA's masked LM is its
    generator's, so its check adds the generator at the positions whose input hides the
    original (`hidden_accuracy`, against `unigram`) and the discriminator against always
    answering "original", with its loss against the constant answer's and its ROC AUC (0.5:
    no ranking of replaced over original tokens), both also against a detector that sees each
    token alone (`token_alone`). Cached in baselines.json and along_training.json."""
    spec = objectives.get(run.objective).masking
    if "ltr" in objectives.get(run.objective).heads and run.steps:
        return _next_token_check(h, run)
    if spec is None or not run.steps:
        return None
    wd = h.pretrain(run)
    cached = wd / "baselines.json"
    if not cached.exists():
        from bert_jax.input import EvalInput
        from bert_jax.objectives.baselines import masked_lm_baselines

        c = h.pretrain_config(run)
        masking = pretraining_task(c, bert_config_from(c)).dynamic_masking

        def batches(files: str, n: int):  # the eval's masks: same seed, same examples
            data = EvalInput(files, c.global_batch_size, c.max_seq_length,
                             c.max_predictions_per_seq, dynamic_masking=masking, seed=c.seed,
                             objective=c.objective)  # fmt: skip
            return itertools.islice(iter(data), n)

        base = masked_lm_baselines(batches(c.train_files, 200),
                                   batches(c.eval_files, c.max_eval_steps), masking.mask_id)
        write_json_atomic(cached, base, sort_keys=True)
    base = json.loads(cached.read_text())
    final = json.loads((wd / "done.json").read_text())
    check = {"mlm_accuracy": final["eval_masked_lm_accuracy"], "unigram": base["unigram"],
             "context_free": base["unigram_or_copy"]}  # fmt: skip
    if not registry.for_objective(run.objective).masked_lm_is_the_model:  # ELECTRA
        check.update(
            hidden_accuracy=final.get("eval_masked_lm_hidden_accuracy"),
            discriminator_accuracy=final["eval_replaced_token_accuracy"],
            always_original=final["eval_replaced_token_baseline"],
        )
        if "eval_replaced_token_fraction" in final:  # runs from before it was logged lack it
            check.update(
                discriminator_loss=final["eval_replaced_token_loss"],
                constant_loss=binary_entropy(final["eval_replaced_token_fraction"]),
            )
        # The AUC (logged since 2026-11-28) and the token-alone bars, for older runs too.
        from bert_jax.ablations.token_alone import token_alone_bars

        steps = along_training(h, run, token_alone_bars, last_only=True)
        last = steps[max(steps)] if steps else {}
        if "eval_replaced_token_auc" in last:
            check["discriminator_auc"] = last["eval_replaced_token_auc"]
        check.update({k: last[k] for k in ("token_alone_loss", "token_alone_auc") if k in last})
    return check


def _unmeasured(row: dict | None, extra: Callable | None) -> bool:
    """A step is measured when it is new, or has only the evaluation while `extra` is asked."""
    return row is None or (extra is not None and all(k.startswith("eval_") for k in row))


def along_training(
    h: Harness,
    run: Pretrain,
    extra: Callable[[Any, Any, Any], dict] | None = None,
    last_only: bool = False,
) -> dict[int, dict[str, float]]:
    """The run's own held-out evaluation (the trainer's eval step on the same batches) at each
    checkpoint it kept, by step: how a pretraining metric moved along the run, including ones
    logged only since the run was made (ELECTRA's `eval_replaced_token_auc`). The last step
    reproduces the run's done.json. `extra(task, trainer, params)` adds measurements of its own
    (keys not starting with "eval_"). `last_only`: measure only the last kept checkpoint (a
    table's check needs no more). Cached per step in along_training.json."""
    from bert_jax.checkpoint import Checkpointer

    wd = h.pretrain(run)
    cached = wd / "along_training.json"
    done: dict[str, dict] = json.loads(cached.read_text()) if cached.exists() else {}
    ckpt = Checkpointer(wd / "checkpoints", read_only=True, async_save=False)
    try:
        steps = sorted(ckpt.all_steps())[-1:] if last_only else sorted(ckpt.all_steps())
        new = [s for s in steps if _unmeasured(done.get(str(s)), extra)]
        if new:
            task, trainer = _one_device_trainer(h, run)
            for s in new:
                state, _ = ckpt.restore(trainer.abstract_state(), s)
                metrics = task.evaluate(trainer, state.params)
                row = {f"eval_{k}": float(v) for k, v in metrics.items()}
                if extra is not None:
                    row |= extra(task, trainer, state.params)
                done[str(s)] = row
                write_json_atomic(cached, done, sort_keys=True)
    finally:
        ckpt.close()
    return {int(s): m for s, m in sorted(done.items(), key=lambda kv: int(kv[0]))}
