"""What fine-tuning does differently when its config has a `distill` block: the checks before any
data is read, the training rows (the cache's, or the task's and the transfer text's for the
online teacher), the student Task and, online, the teacher's weights in the initial params.

    d = Distillation.from_config(cfg, student_vocab, tokenizer)   # None: plain fine-tuning
    d.use_rows(job)      # after job.load: job.train / num_train_examples become the student's
    task = d.wrap(job.train_task(bert, batch)); init = d.add_teacher(init)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from bert_jax.errors import BertJaxError
from bert_jax.tasks.distill import cache, losses, transfer
from bert_jax.tasks.distill.student import DistillTask
from bert_jax.tasks.distill.teacher import Teacher, load_teacher, vocab_fingerprint
from bert_jax.tasks.glue import get_spec


def _refuse_other_tokenization(what: str, family: str) -> BertJaxError:
    per_token = family in ("ner", "squad")
    why = ("its soft labels are per token of the teacher's tokenization" if per_token
           else "the rows are the teacher's token ids")  # fmt: skip
    return BertJaxError(
        f"the student's vocabulary differs from the teacher's ({what}); {why}: give the "
        "student the teacher's vocab (--config.vocab_file) or a student that has it"
    )


@dataclasses.dataclass
class Distillation:
    cfg: Any  # the fine-tuning config
    teacher: Teacher | None  # online
    stats: dict | None  # cached

    @classmethod
    def from_config(cls, cfg, student_vocab, tokenizer) -> Distillation | None:
        d = cfg.get("distill")
        if d is None or not (d.data or d.teacher):
            return None
        if d.data and d.teacher:
            raise BertJaxError("config distill.data and distill.teacher: give one (the cache, "
                               "or the teacher to run online)")  # fmt: skip
        if cfg.get("feature_based"):
            raise BertJaxError("config distill: not with feature_based (frozen features)")
        if d.max_transfer_examples < 0:  # a slice with it would keep all but the last rows
            raise BertJaxError(f"config distill.max_transfer_examples={d.max_transfer_examples}: "
                               "must be >= 0 (0 = all rows)")  # fmt: skip
        losses.check_loss(d.loss, cfg.task_family == "glue" and get_spec(cfg.task).is_regression)
        mine = vocab_fingerprint(student_vocab) if student_vocab else ""
        if d.teacher:
            teacher = load_teacher(d.teacher, cfg)
            if vocab_fingerprint(teacher.vocab_file) != mine:
                raise _refuse_other_tokenization(f"{teacher.vocab_file} vs {student_vocab}",
                                                 cfg.task_family)  # fmt: skip
            return cls(cfg, teacher, None)
        stats = cache.read_stats(d.data)
        where = f"config distill.data={d.data}"
        for key, want in (("task_family", cfg.task_family), ("max_seq_length", cfg.max_seq_length)):
            if stats.get(key) != want:
                raise BertJaxError(f"{where}: labelled for {key}={stats.get(key)!r}, the config "
                                   f"has {want!r} (task mismatch)")  # fmt: skip
        if cfg.task_family == "glue" and stats.get("task") != cfg.task:
            raise BertJaxError(f"{where}: labelled for {stats.get('task')}, the config is "
                               f"{cfg.task} (task mismatch)")  # fmt: skip
        if stats.get("teacher_vocab_sha256") != mine:
            raise _refuse_other_tokenization(f"{stats.get('teacher')} vs {student_vocab}",
                                             cfg.task_family)  # fmt: skip
        if stats.get("do_lower_case") not in (None, tokenizer.do_lower_case):
            raise BertJaxError(f"{where}: the teacher's rows are do_lower_case="
                               f"{stats['do_lower_case']}, the student's tokenizer is "
                               f"{tokenizer.do_lower_case}")  # fmt: skip
        return cls(cfg, None, stats)

    def use_rows(self, job, tokenizer) -> dict[str, int]:
        """Replace the job's training rows with the student's; returns their counts."""
        d = self.cfg.distill
        if self.stats is not None:
            _, rows = cache.read_cache(d.data)
            counts = self.stats["examples"]
        else:
            rows, counts = transfer.training_rows(
                self.cfg, job, tokenizer, d.input_file, d.pairing, self.cfg.seed,
                d.max_transfer_examples,
            )  # fmt: skip
        job.train, job.num_train_examples = rows, counts["total"]
        return counts

    def wrap(self, task) -> DistillTask:
        d = self.cfg.distill
        return DistillTask(task, d.loss, float(d.temperature), float(d.alpha), self.teacher)

    def add_teacher(self, init: Any) -> Any:
        """Online: the fresh params' `teacher` subtree filled with the teacher's weights."""
        if self.teacher is None:
            return init

        def fill(path, leaf):
            keys = [str(getattr(p, "key", p)) for p in path]
            node: Any = self.teacher.params
            for k in keys:
                if not isinstance(node, dict) or k not in node:
                    raise BertJaxError(f"{self.teacher.source}: no {'/'.join(keys)} for the "
                                       "teacher model")  # fmt: skip
                node = node[k]
            value = np.asarray(node, np.float32)
            if value.shape != tuple(leaf.shape):
                shape = tuple(leaf.shape)
                raise BertJaxError(f"{self.teacher.source}: {'/'.join(keys)} has shape "
                                   f"{value.shape}, the teacher model {shape}")  # fmt: skip
            return value

        out = dict(init)
        out["teacher"] = jax.tree_util.tree_map_with_path(fill, init["teacher"])
        return out
