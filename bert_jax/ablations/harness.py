"""Runs a table's arms: corpus -> vocab -> shards -> pretraining -> fine-tuning per task and seed.

Everything lands under the workdir, keyed by what determines it, and a finished piece is never
redone, so a killed sweep rerun with the same arguments continues where it stopped and ends with
the same numbers:

  data/          corpus split (train.txt, eval.txt), vocab/, shards per pairing (nsp/, sop/)
  suite/         the built-in downstream tasks (bert_jax.ablations.suite), unless --task is given
  pretrain/KEY/  one pretraining workdir per run (tables.Pretrain.key); done.json when finished
  finetune/      fine-tuning runs (bert_jax.ablations.layout), each arm's choice-of-rate runs
  lr_slices/     each task's train re-split to choose rates on (bert_jax.ablations.lr_choice)
  .data.lock     held while data/ or suite/ is built, so sweeps sharing the workdir build once
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator

import ml_collections
import numpy as np
from etils import epath

from bert_jax import objectives
from bert_jax.ablations import checks, run_time, stats, suite
from bert_jax.ablations.inputs import (
    FAMILY,
    check_task_dir,
    documents_within,
    read_documents,
    released_checkpoint,
    write_docs,
)
from bert_jax.ablations.layout import arm_subdir, budget_subdir, length_suffix
from bert_jax.ablations.scales import BILSTM_HEAD_LR, Scale
from bert_jax.ablations.tables import INTRINSIC, Arm, Pretrain
from bert_jax.atomic_write import is_local, write_json_atomic
from bert_jax.corpus import embedded
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.errors import BertJaxError
from bert_jax.runs import finetune as runner
from bert_jax.runs.pretrain import run_pretraining
from bert_jax.tokenization.vocab_builder import build_vocab
from bert_jax.train.config import finetune_config, pretrain_config
from bert_jax.train.lock import WorkdirLock, in_use

_ONE_DEVICE = {"data": 1, "fsdp": 1, "tensor": 1}
# Held out: one document in five (a tenth before suite v3), for the cpu suite's 2000 dev examples.
HELD_OUT_EVERY = 5
# Scale fields that are part of each run's directory name (or chosen per table): free to differ.
_KEYED = ("name", "model", "steps", "seeds", "pretrain_seeds", "sizes", "finetune_epochs",
          "finetune_lr", "finetune_lrs", "finetune_dropout", "warn_repetition",
          "max_repetition", "task_epochs")  # fmt: skip


def shard_objective(objective: str) -> str:
    """The create-pretraining-data objective whose shards (without masks) serve `objective`:
    sentence pairs (nsp), swapped pairs (sop) or packed full sentences (MLM-only, ELECTRA)."""
    pairing = objectives.get(objective).pairing
    return {"swapped_pairs": "sop", "packed": "full_sentences"}.get(pairing, "nsp")


def _last_checkpoint(run: epath.Path) -> int:
    """The step of a pretraining run's latest checkpoint (0 without one)."""
    steps = [int(d.name) for d in (run / "checkpoints").glob("*") if d.name.isdigit()]
    return max(steps, default=0)


def _on_seed0(arm: Arm) -> Arm:
    """`arm` on its pretraining seed 0, where its learning rates are chosen."""
    return dataclasses.replace(arm, pretrain=dataclasses.replace(arm.pretrain, seed=0))


@dataclasses.dataclass
class Harness:
    workdir: str
    scale: Scale
    corpus: str = ""  # comma-separated globs; "" = the embedded corpus
    tasks: dict[str, str] = dataclasses.field(default_factory=dict)  # kind -> user data dir
    progress: Callable[[str], None] = print

    def __post_init__(self) -> None:
        self.root = epath.Path(self.workdir)
        self.root.mkdir(parents=True, exist_ok=True)
        self._docs: list[list[str]] | None = None
        self._seq: dict[tuple[str, str], int] = {}  # per (downstream kind, released checkpoint)
        self._building_depth = 0
        # Inputs are checked before settings.json records them (a typo recorded there would
        # refuse the corrected command) and before any arm starts.
        for kind, directory in self.tasks.items():
            check_task_dir(kind, directory)
        if self.corpus and not (self.root / "data" / "eval.txt").exists():
            self._documents()  # globs that match nothing, too few documents
        self._check_settings()

    @contextlib.contextmanager
    def _building(self) -> Iterator[None]:
        """The shared data (corpus split, vocab, shards, suite) is built by one process at a
        time: a second `bert-jax ablate` on this workdir waits here, then finds it built. An
        flock on local workdirs (the kernel drops it if the holder dies); re-entrant, since
        the shards need the vocab."""
        with contextlib.ExitStack() as stack:
            if not self._building_depth and is_local(self.root):
                import fcntl

                lock = stack.enter_context(open(self.root / ".data.lock", "a"))
                fcntl.flock(lock, fcntl.LOCK_EX)
            self._building_depth += 1
            try:
                yield
            finally:
                self._building_depth -= 1

    def _build_once(self, marker: epath.Path, build: Callable[[], None]) -> None:
        """`build()` unless `marker` (written last by it) exists, looked at again under the
        data lock, so a sweep that waited there does not build it a second time."""
        if marker.exists():
            return
        with self._building():
            if not marker.exists():
                build()

    def _check_settings(self) -> None:
        """Finished runs are keyed by objective, model, steps, mix, task, fine-tuning budget and
        seed only: the rest of the scale, the corpus, the --task data and the built-in suite's
        construction (`suite.VERSION`) are recorded on first use, and a workdir made with other
        values is refused rather than mixed into the new tables."""
        now = {k: v for k, v in dataclasses.asdict(self.scale).items() if k not in _KEYED}
        extra = {"corpus": self.corpus, "tasks": self.tasks, "suite_version": suite.VERSION}
        now = json.loads(json.dumps({**now, **extra}))
        path = self.root / "settings.json"
        if not path.exists():
            write_json_atomic(path, now, sort_keys=True)
            return
        before = {k: v for k, v in json.loads(path.read_text()).items() if k not in _KEYED}
        changed = sorted(k for k in now.keys() | before.keys() if now.get(k) != before.get(k))
        if changed:
            diff = ", ".join(f"{k}={before.get(k)!r} (now {now.get(k)!r})" for k in changed)
            raise BertJaxError(
                f"{path}: this workdir's runs were made with {diff}; use another --workdir "
                "(or the earlier settings) so the tables do not mix the two"
            )

    # ---- data --------------------------------------------------------------------------------
    def _documents(self) -> list[list[str]]:
        if self._docs is None:
            docs = read_documents(self.corpus) if self.corpus else list(embedded.iter_documents())
            self._docs = docs
        return self._docs

    def _corpus_split(self) -> tuple[epath.Path, epath.Path]:
        """Every `HELD_OUT_EVERY`-th document is held out: held-out pretraining text (the first
        tenth of `corpus_bytes`, or 300 KB when the scale reads the whole corpus) and the
        built-in suite."""
        data = self.root / "data"
        train, held = data / "train.txt", data / "eval.txt"

        def split() -> None:
            data.mkdir(parents=True, exist_ok=True)
            held_out, rest = self._held_out_and_rest()
            write_docs(rest, train, self.scale.corpus_bytes)
            size = self.scale.corpus_bytes
            write_docs(held_out, held, max(size // 10, 20_000) if size else 300_000)

        self._build_once(held, split)
        return train, held

    def _held_out_and_rest(self) -> tuple[list[list[str]], list[list[str]]]:
        docs = self._documents()
        return docs[::HELD_OUT_EVERY], [d for i, d in enumerate(docs) if i % HELD_OUT_EVERY]

    def _suite_documents(self) -> list[list[str]]:
        """The held-out documents, then those the pretraining text left out (beyond the
        scale's `corpus_bytes`): no pretraining run reads a sentence the suite is built of."""
        held_out, rest = self._held_out_and_rest()
        return held_out + rest[documents_within(rest, self.scale.corpus_bytes) :]

    def vocab_file(self) -> str:
        out = self.root / "data" / "vocab"

        def vocab() -> None:
            train, _ = self._corpus_split()
            self.progress(f"building a {self.scale.vocab_size}-token vocab")
            build_vocab(str(train), self.scale.vocab_size, out, num_threads=1)

        self._build_once(out / "vocab_stats.json", vocab)
        return str(out / "vocab.txt")

    def shards(self, objective: str) -> tuple[str, str]:
        """(train, eval) shard globs for an objective's pairing, without static masks (masks are
        drawn at training time, so every masking mix reads the same shards)."""
        flag = shard_objective(objective)
        base = self.root / "data" / flag
        vocab = self.vocab_file()
        train, held = self._corpus_split()
        for split, text in (("train", train), ("eval", held)):

            def write(split: str = split, text: epath.Path = text) -> None:
                self.progress(f"writing {flag} {split} shards")
                create_pretraining_data(
                    str(text), str(base / split), vocab, objective=flag, dynamic_masking=True,
                    max_seq_length=self.scale.seq, max_predictions_per_seq=self.scale.predictions,
                    dupe_factor=self.scale.dupe_factor if split == "train" else 1,
                )  # fmt: skip

            self._build_once(base / split / "stats.json", write)
        return str(base / "train" / "shard-*.tfrecord"), str(base / "eval" / "shard-*.tfrecord")

    def task_dir(self, kind: str) -> str:
        if kind in self.tasks:
            return self.tasks[kind]
        out = self.root / "suite"

        def build() -> None:
            self.progress("building the downstream suite from held-out documents")
            counts = suite.build_suite(
                self._suite_documents(), str(out), self.scale.suite_train, self.scale.suite_dev
            )
            write_json_atomic(out / "counts.json", counts, sort_keys=True)

        self._build_once(out / "counts.json", build)
        return str(out / kind)

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
        if not (wd / "done.json").exists():
            self._check_repetition(run)
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
        lr_choice), chosen once per arm and task (pretraining and fine-tuning seed 0) and kept
        in choice.json. Feature-based NER keeps its own 1e-3. `choose=False`: None rather than
        running the choice when it has not been made."""
        s = self.scale
        if not s.finetune_lrs or task == "conll_feature":
            return s.finetune_lr
        base = _on_seed0(arm)
        where = self._choice_dir(arm, task)
        choice = where / "choice.json"
        if not choice.exists() and not choose:
            return None
        if not choice.exists():
            slices = self.train_slice(task)  # not conll_feature: it returned above
            self.progress(f"choosing {arm.name}'s learning rate for {task} on a slice of train")
            scores = {f"{lr:g}": self._finetune_run(base, task, 0, lr, slices, where / f"lr{lr:g}")
                      for lr in s.finetune_lrs}  # fmt: skip
            best = max(s.finetune_lrs, key=lambda lr: scores[f"{lr:g}"])  # ties: the first
            write_json_atomic(choice, {"scores": scores, "chosen": best}, sort_keys=True)
        return float(json.loads(choice.read_text())["chosen"])

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
            left = 0 if done else max(p.steps, 1) - _last_checkpoint(wd)
            kind = f"{p.objective} {p.model}{'' if p.steps else ' random'}"
            yield run_time.Ref("pretraining", kind, wd, done, left)
        if task in INTRINSIC:
            return
        kind = f"{task} {p.model}{' + BiLSTM' if arm.bilstm else ''}"
        if self.scale.finetune_lrs and task != "conll_feature":
            for lr in self.scale.finetune_lrs:
                run = self._choice_dir(arm, task) / f"lr{lr:g}"
                yield run_time.Ref("choosing", kind, run, (run / "eval_results.json").exists())
        lr = self.learning_rate(arm, task, choose=False)
        run = None if lr is None else self._finetune_dir(arm, task, seed, lr)
        done = run is not None and (run / "eval_results.json").exists()
        yield run_time.Ref("finetuning", kind, run, done)

    def to_do(self, jobs: list[tuple[Arm, str, int]]) -> str | None:
        """What a continued sweep has left and about how long it takes; None on a workdir
        with no timed pretraining run yet (nothing to go by, and nothing is looked at)."""
        if not any((self.root / "pretrain").glob("*/" + run_time.FILE)):
            return None
        return run_time.describe(run_time.remaining(r for j in jobs for r in self.job_runs(*j)))

    def train_slice(self, kind: str) -> str:
        """`kind`'s data re-split: the first 80% of its train as train, the rest as dev."""
        from bert_jax.ablations.lr_choice import write_train_slice

        out = self.root / "lr_slices" / kind

        def build() -> None:
            sizes = write_train_slice(kind, self.task_dir(kind), str(out))
            write_json_atomic(out / "slice.json", sizes, sort_keys=True)

        self._build_once(out / "slice.json", build)
        return str(out)

    def finetune(self, arm: Arm, task: str, seed: int) -> float:
        """Dev headline x 100 (accuracy; entity F1; SQuAD F1) of one fine-tuning run."""
        kind = task.removesuffix("_feature")
        lr = self.learning_rate(arm, task)
        return self._finetune_run(arm, task, seed, lr, self.task_dir(kind),
                                  self._finetune_dir(arm, task, seed, lr))  # fmt: skip

    def _finetune_run(
        self, arm: Arm, task: str, seed: int, lr: float, data_dir: str, out: epath.Path
    ) -> float:
        s = self.scale
        src = self.pretrain(arm.pretrain)  # Figure 5: its checkpoint of `arm.step`
        kind = task.removesuffix("_feature")
        results = out / "eval_results.json"
        if not results.exists():
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
        metrics = json.loads(results.read_text())
        if kind == "squad":
            return float(metrics["f1"])
        return 100.0 * float(metrics["f1" if kind == "conll" else "accuracy"])

    def example_rows(self, arm: Arm, task: str, seed: int) -> np.ndarray | None:
        """Per-example statistics of a finished fine-tuning run's dev predictions (stats.py),
        or of the pretrained model's own pair head (checks.pair_rows); None for perplexity."""
        if task in INTRINSIC:
            return checks.pair_rows(self, arm, task) if task in checks.PAIR_TASKS else None
        kind = task.removesuffix("_feature")
        run = self._finetune_dir(arm, task, seed)
        return stats.example_rows(kind, self.task_dir(kind), str(run))

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
