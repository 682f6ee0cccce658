"""Runs a table's arms: pretraining -> fine-tuning per task and seed, over the workdir's shared
data (bert_jax.ablations.workdir: corpus split, vocab, shards, suite).

Everything lands under the workdir, keyed by what determines it, and a finished piece is never
redone, so a killed sweep rerun with the same arguments continues where it stopped and ends with
the same numbers:

  pretrain/KEY/  one pretraining workdir per run (tables.Pretrain.key); done.json when finished
  finetune/      fine-tuning runs (bert_jax.ablations.layout), each arm's choice-of-rate runs
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Iterable, Iterator

import ml_collections
import numpy as np
from etils import epath

from bert_jax import objectives
from bert_jax.ablations import checks, provenance, run_time, stats
from bert_jax.ablations.inputs import FAMILY, released_checkpoint
from bert_jax.ablations.layout import (
    arm_subdir,
    budget_subdir,
    last_checkpoint,
    length_suffix,
    require_checkpoint,
    run_kind,
)
from bert_jax.ablations.scales import BILSTM_HEAD_LR
from bert_jax.ablations.tables import INTRINSIC, Arm, Pretrain
from bert_jax.ablations.workdir import Workdir
from bert_jax.atomic_write import write_json_atomic
from bert_jax.errors import BertJaxError
from bert_jax.runs import finetune as runner
from bert_jax.runs.pretrain import run_pretraining
from bert_jax.train.config import finetune_config, pretrain_config
from bert_jax.train.lock import WorkdirInUse, WorkdirLock, in_use

_ONE_DEVICE = {"data": 1, "fsdp": 1, "tensor": 1}
ROWS = "example_rows.npz"  # a fine-tuning run's per-example dev statistics (stats.example_rows)


def _pretraining_kind(objective: str, model: str, random: bool) -> str:
    """What a pretraining step's cost depends on (random init: a run of one step at rate 0)."""
    return f"{objective} {model}" + (" random" if random else "")


def _on_seed0(arm: Arm) -> Arm:
    """Where `arm`'s learning rates are chosen: its pretraining seed 0's last checkpoint. A
    Figure 5 point fine-tunes at the rate chosen for its run's end, so any pretraining seed's
    points can be made from that seed's own checkpoints alone (units keep no checkpoint)."""
    pretrain = dataclasses.replace(arm.pretrain, seed=0)
    return dataclasses.replace(arm, pretrain=pretrain, step=None)


@dataclasses.dataclass
class Harness(Workdir):
    """The workdir's runs: pretraining, fine-tuning (choosing each arm's rate) and scores."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._seq: dict[tuple[str, str], int] = {}  # per (downstream kind, released checkpoint)

    # ---- pretraining -------------------------------------------------------------------------
    def pretrain_config(self, run: Pretrain) -> ml_collections.ConfigDict:
        s = self.scale
        spec = objectives.get(run.objective)
        train_files, eval_files = self.shards(run.objective)
        c = pretrain_config(run.model)
        c.update(
            dict(
                dtype=s.dtype, objective=run.objective, vocab_file=self.vocab_file(),
                train_files=train_files, eval_files=eval_files, max_seq_length=s.seq,
                max_predictions_per_seq=s.predictions, global_batch_size=s.batch,
                learning_rate=s.learning_rate, warmup_steps=s.warmup, schedule="linear",
                train_steps=max(run.steps, 1), eval_every_steps=max(run.steps, 1),
                checkpoint_every_steps=max(run.steps // 4, 1), keep_checkpoints=5,
                log_every_steps=max(run.steps // 10, 1), max_eval_steps=s.eval_steps,
                async_checkpoints=False, hidden_dropout_prob=s.dropout,
                attention_probs_dropout_prob=s.dropout, seed=run.seed,
            )
        )  # fmt: skip
        c.mesh.update(_ONE_DEVICE)
        c.family = run.family
        if spec.masking is not None:
            c.dynamic_masking = True
            c.mask_prob, c.random_prob = run.mask_and_random_prob
        if not run.steps:  # the model at its initialisation: one step that changes nothing
            c.learning_rate, c.warmup_steps, c.schedule = 0.0, 0, "constant"
        return c

    def repetition(self, run: Pretrain) -> float:
        """Passes a run makes over its pretraining text: the tokens its steps read over the
        text's tokens (the shards hold `dupe_factor` maskings of it)."""
        train, _ = self.shards(run.objective)
        stats_json = json.loads((epath.Path(train).parent / "stats.json").read_text())
        text_tokens = stats_json["tokens"] / max(self.scale.dupe_factor, 1)
        real_per_row = stats_json["tokens"] / max(stats_json.get("records", 1), 1)
        return run.steps * self.scale.batch * real_per_row / max(text_tokens, 1.0)

    def _check_repetition(self, run: Pretrain) -> None:
        s = self.scale
        if not (s.warn_repetition or s.max_repetition) or not run.steps:
            return
        times = self.repetition(run)
        fix = ("give a larger --corpus (one sentence a line, a blank line between documents) "
               "or fewer --steps")  # fmt: skip
        if s.max_repetition and times > s.max_repetition:
            raise BertJaxError(
                f"{run.key}: {run.steps} steps would read the pretraining text {times:.1f} "
                f"times (the {s.name} scale allows {s.max_repetition:g}): {fix}"
            )
        if s.warn_repetition and times > s.warn_repetition:
            self.progress(f"warning: {run.key} reads its pretraining text {times:.1f} times; "
                          f"{fix} for a budget that repeats it at most a few times")  # fmt: skip

    def pretrain(self, run: Pretrain) -> epath.Path:
        if run.checkpoint:
            return released_checkpoint(run.checkpoint)
        wd = self.root / "pretrain" / run.key
        if (wd / "done.json").exists():
            return wd
        self._check_repetition(run)
        # Held until done.json is written: another sweep that looked between the end of training
        # and done.json would train the run again (WorkdirLock's `outer`).
        with WorkdirLock(wd, outer=True):
            if not (wd / "done.json").exists():  # or another sweep finished it meanwhile
                self.progress(f"pretraining {run.key}")
                config = self.pretrain_config(run)
                result = run_time.timed(wd, lambda: run_pretraining(config, str(wd)))
                result.require_finished(wd, config.train_steps)
                write_json_atomic(wd / "done.json", result.last_eval, sort_keys=True)
        return wd

    # ---- scores ------------------------------------------------------------------------------
    def busy(self, arm: Arm, task: str, seed: int) -> str | None:
        """"PATH: in use by ..." when an unfinished workdir this job needs (its pretraining run,
        then its fine-tuning run) is held by another live process, such as a second sweep on
        this workdir; else None. Takes no lock."""
        pretraining = self.root / "pretrain" / arm.pretrain.key
        runs = [] if arm.pretrain.checkpoint else [(pretraining, "done.json")]
        # A rate not chosen yet names no fine-tuning directory: `finetune` chooses it.
        if task not in INTRINSIC and (lr := self.learning_rate(arm, task, choose=False)):
            runs.append((self._finetune_dir(arm, task, seed, lr), "eval_results.json"))
        for run, marker in runs:
            if not (run / marker).exists() and (owner := WorkdirLock(run).holder()):
                return in_use(run, owner)
        return None

    def _arm_dir(self, arm: Arm, task: str) -> epath.Path:
        return self.root / "finetune" / arm_subdir(arm, task)

    def _finetune_dir(self, arm: Arm, task: str, seed: int, lr: float | None = None) -> epath.Path:
        lr = self.learning_rate(arm, task) if lr is None else lr
        budget = budget_subdir(self.scale, lr, task, self.finetune_seq(arm, task))
        return self._arm_dir(arm, task) / budget / f"seed{seed}"

    def finetune_seq(self, arm: Arm, task: str) -> int:
        """The sequence length of `task`'s fine-tuning runs: the longest example's in the
        workdir's vocab, or a released checkpoint's own (bert_jax.ablations.task_length)."""
        from bert_jax.ablations.task_length import fine_tuning_length, released_length

        kind = task.removesuffix("_feature")
        key = (kind, arm.pretrain.checkpoint)
        if key not in self._seq:
            cap, data = self.scale.seq, self.task_dir(kind)
            if arm.pretrain.checkpoint:
                ckpt = released_checkpoint(arm.pretrain.checkpoint)
                self._seq[key] = released_length(kind, data, ckpt, cap)
            else:
                self._seq[key] = fine_tuning_length(kind, data, self.vocab_file(), cap)
        return self._seq[key]

    def learning_rate(self, arm: Arm, task: str, choose: bool = True) -> float | None:
        """The arm's fine-tuning rate on `task`: the scale's `finetune_lr`, or the one of its
        `finetune_lrs` that scores best on the held slice of train (bert_jax.ablations.
        lr_choice), chosen once per arm and task (pretraining and fine-tuning seed 0, at the
        end of pretraining: a Figure 5 point uses its run's end's rate) and kept
        in choice.json. Feature-based NER keeps its own 1e-3. `choose=False`: None rather than
        running the choice when it has not been made. Sweeps sharing the workdir try its rates
        side by side: one skips a rate the other is trying and is put off (WorkdirInUse) after
        the rest, to come back for its score."""
        s = self.scale
        if not s.finetune_lrs or task == "conll_feature":
            return s.finetune_lr
        base = _on_seed0(arm)
        where = self._choice_dir(arm, task)
        choice = where / "choice.json"
        if not choice.exists() and not choose:
            return None
        if not choice.exists():
            self._require_seed0_checkpoint(arm, task)
            slices = self.train_slice(task)  # not conll_feature: it returned above
            self.progress(f"choosing {arm.name}'s learning rate for {task} on a slice of train")
            scores, held = {}, None
            for lr in s.finetune_lrs:  # a rate another sweep is trying is left to it meanwhile
                try:
                    scores[f"{lr:g}"] = self._finetune_run(base, task, 0, lr, slices,
                                                           where / f"lr{lr:g}")  # fmt: skip
                except WorkdirInUse as e:
                    held = held or e
            if held:  # the job is put off and comes back for the held rate's score
                raise held
            best = max(s.finetune_lrs, key=lambda lr: scores[f"{lr:g}"])  # ties: the first
            write_json_atomic(choice, {"scores": scores, "chosen": best}, sort_keys=True)
        return float(json.loads(choice.read_text())["chosen"])

    def _require_seed0_checkpoint(self, arm: Arm, task: str) -> None:
        """Refuses a rate choice for another pretraining seed's job on a seed-0 run brought in
        from a unit (no checkpoint), naming the unit that makes the choice: a `:1` unit started
        before its `:0` unit chose that task's rate, on another machine or workdir."""
        if arm.pretrain.seed == 0 or arm.pretrain.checkpoint:
            return  # seed 0's own job: `_finetune_run` refuses it by layout.require_checkpoint
        seed0 = self.root / "pretrain" / _on_seed0(arm).pretrain.key
        if (seed0 / "done.json").exists() and not last_checkpoint(seed0):
            raise BertJaxError(
                f"{seed0}: {arm.name}:{arm.pretrain.seed}'s rate for {task} is chosen on this "
                "run (pretraining seed 0) and is not chosen yet; the run was brought in from a "
                "unit without its checkpoint, so the choice is made where it was pretrained: "
                f"finish --units '{arm.name}:0' there (its unit keeps the choice), bring that "
                "unit in and run this again"
            )

    def _choice_dir(self, arm: Arm, task: str) -> epath.Path:
        """Where the arm's rate for `task` is chosen (on pretraining seed 0's run)."""
        s = self.scale
        among = "-".join(f"{lr:g}" for lr in s.finetune_lrs)
        budget = f"e{s.epochs_for(task):g}-d{s.finetune_dropout:g}"
        budget += length_suffix(s, self.finetune_seq(arm, task))
        return self._arm_dir(_on_seed0(arm), task) / f"choose-{among}-{budget}"

    def job_runs(self, arm: Arm, task: str, seed: int) -> Iterator[run_time.Ref]:
        """Each run a job uses, finished or not (bert_jax.ablations.run_time); runs not chosen
        or made yet are only looked at."""
        p = arm.pretrain
        if not p.checkpoint:
            wd = self.root / "pretrain" / p.key
            done = (wd / "done.json").exists()
            left = 0 if done else max(p.steps, 1) - last_checkpoint(wd)
            kind = _pretraining_kind(p.objective, p.model, random=not p.steps)
            yield run_time.Ref("pretraining", kind, wd, done, left)
        if task in INTRINSIC:
            return
        if self.scale.finetune_lrs and task != "conll_feature":
            for lr in self.scale.finetune_lrs:
                run = self._choice_dir(arm, task) / f"lr{lr:g}"
                done = (run / "eval_results.json").exists()
                yield run_time.Ref("choosing", run_kind(run), run, done)
        lr = self.learning_rate(arm, task, choose=False)
        run = self._finetune_dir(arm, task, seed, lr or self.scale.finetune_lrs[0])
        done = lr is not None and (run / "eval_results.json").exists()
        yield run_time.Ref("finetuning", run_kind(run), run if lr else None, done)

    def to_do(self, jobs: list[tuple[Arm, str, int]]) -> str | None:
        """What a continued sweep has left and about how long it takes, by the finished runs of
        the same kind anywhere in the workdir (other tables' too); None on a workdir with no
        timed pretraining run yet (nothing to go by, and nothing is looked at)."""
        if not any((self.root / "pretrain").glob("*/" + run_time.FILE)):
            return None
        refs = itertools.chain((r for j in jobs for r in self.job_runs(*j)), self._finished())
        return run_time.describe(run_time.remaining(refs))

    def _finished(self) -> Iterator[run_time.Ref]:
        """Every finished run in the workdir, to estimate the unfinished ones by."""
        for done in (self.root / "pretrain").glob("*/done.json"):
            c = json.loads((done.parent / "config.json").read_text())
            kind = _pretraining_kind(c["objective"], c["model"], random=not c["learning_rate"])
            yield run_time.Ref("pretraining", kind, done.parent, True)
        for record in (self.root / "finetune").glob("*/*/*/*/" + run_time.FILE):
            run = record.parent
            part = "choosing" if run.parent.name.startswith("choose-") else "finetuning"
            yield run_time.Ref(part, run_kind(run), run, True)

    def finished(self, arm: Arm, task: str, seed: int) -> bool:
        """Whether every run the job uses has finished, and an intrinsic job's rows are made
        (checks.rows_file: a unit keeps them, not its checkpoint); nothing is run or chosen."""
        if task in INTRINSIC and not arm.pretrain.checkpoint:
            run = self.root / "pretrain" / arm.pretrain.key
            if not checks.rows_file(run, task).exists():
                return False
        return all(r.done for r in self.job_runs(arm, task, seed))

    def finetune(self, arm: Arm, task: str, seed: int) -> float:
        """Dev headline x 100 (accuracy; entity F1; SQuAD F1) of one fine-tuning run."""
        kind = task.removesuffix("_feature")
        lr = self.learning_rate(arm, task)
        return self._finetune_run(arm, task, seed, lr, self.task_dir(kind),
                                  self._finetune_dir(arm, task, seed, lr))  # fmt: skip

    def _finetune_run(
        self, arm: Arm, task: str, seed: int, lr: float, data_dir: str, out: epath.Path
    ) -> float:
        src = self.pretrain(arm.pretrain)  # Figure 5: its checkpoint of `arm.step`
        kind = task.removesuffix("_feature")
        results = out / "eval_results.json"
        if not results.exists() and not arm.pretrain.checkpoint:
            require_checkpoint(src, "a new fine-tuning run on it")
        if not results.exists():
            # Held until the results and the run's time are written (as pretraining's above).
            with WorkdirLock(out, outer=True):
                if not results.exists():
                    self._finetune_anew(arm, task, seed, lr, data_dir, out, src)
        metrics = json.loads(results.read_text())
        if kind == "squad":
            return float(metrics["f1"])
        return 100.0 * float(metrics["f1" if kind == "conll" else "accuracy"])

    def _finetune_anew(
        self, arm: Arm, task: str, seed: int, lr: float, data_dir: str, out: epath.Path,
        src: epath.Path,
    ) -> None:  # fmt: skip
        """Fine-tunes `arm`'s checkpoint `src` on `task` into `out` (the caller holds `out`)."""
        s, kind = self.scale, task.removesuffix("_feature")
        c = finetune_config(FAMILY[kind])
        c.update(
            dict(
                data_dir=data_dir, init_checkpoint=str(src), seed=seed,
                init_checkpoint_step=arm.step or 0,
                max_seq_length=self.finetune_seq(arm, task), learning_rate=lr,
                num_train_epochs=s.epochs_for(task), train_batch_size=s.finetune_batch,
                eval_batch_size=64, log_every_steps=10_000, checkpoint_every_steps=10**9,
                num_devices=1, async_checkpoints=False, dropout=s.finetune_dropout,
                dtype=s.dtype,
            )
        )  # fmt: skip
        c.mesh.update(_ONE_DEVICE)
        if FAMILY[kind] == "glue":
            c.task = kind
        if kind == "squad":
            c.doc_stride, c.max_query_length = s.seq // 4, s.seq // 4
        if arm.bilstm:
            c.bilstm_size, c.head_learning_rate = s.lstm_size, BILSTM_HEAD_LR
        if task == "conll_feature":  # Table 7's best: concat of the last four layers
            c.feature_based, c.lstm_size, c.learning_rate = True, s.lstm_size, 1e-3
        run_time.timed(out, lambda: runner.finetune(c, str(out)))

    def example_rows(self, arm: Arm, task: str, seed: int) -> np.ndarray | None:
        """Per-example statistics of a finished fine-tuning run's dev predictions (stats.py),
        of the pretrained model's own pair head (checks.pair_rows), or its held-out masked-LM
        loss per sequence (checks.masked_lm_loss_rows)."""
        if task in checks.PAIR_TASKS:
            return checks.pair_rows(self, arm, task)
        if task == "mlm_ppl":
            return checks.masked_lm_loss_rows(self, arm.pretrain)
        kind = task.removesuffix("_feature")
        run = self._finetune_dir(arm, task, seed)
        return stats.cached_rows(
            run / ROWS, lambda: stats.example_rows(kind, self.task_dir(kind), str(run))
        )

    def provenance(self, run_dirs: Iterable[epath.Path]) -> dict:
        """A table's provenance from the runs it is made of (provenance.of_table)."""
        return provenance.of_table(self.scale, self.digests(), run_dirs)

    def baselines(self, kind: str) -> dict:
        """The constant answers' scores on the scored (dev) split of a downstream kind."""
        best = stats.best_constant(kind, self.task_dir(kind))
        return {"majority": stats.majority_baseline(self.task_dir(kind), kind),
                "best_constant": best["score"], "constant_answer": best["answer"]}  # fmt: skip

    def constant_rows(self, kind: str, answer: str) -> np.ndarray:
        """Per-example statistics of `answer` given to every dev example (stats.py)."""
        return stats.constant_rows(kind, self.task_dir(kind), answer)

    def pair_constant(self, arm: Arm, task: str) -> tuple[dict, np.ndarray]:
        """The best constant answer on the held-out NSP / SOP pairs: its baseline entry and
        its correctness per pair (checks.pair_constant)."""
        return checks.pair_constant(self, arm, task)

    def intrinsic(self, arm: Arm, task: str) -> float:
        """A task scored on the pretrained model itself (bert_jax.ablations.checks)."""
        return checks.intrinsic(self, arm, task)

    def masked_lm_check(self, run: Pretrain) -> dict | None:
        """The run's pretraining against its no-context bar (bert_jax.ablations.checks)."""
        return checks.masked_lm_check(self, run)
