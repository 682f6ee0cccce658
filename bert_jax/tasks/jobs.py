"""One adapter per task family between the data/metrics modules and the runner.

A job reads its files once (`load`), then for any number of runs (seeds, sweep points) gives the
training Task (`train_task`, from `bert_jax.tasks.train_tasks`), the training arrays (`train`),
the dev/test splits (`evals`, `tests`), and turns the Task's predictions on a split into metrics
and prediction files (`score`, `write_test`). `headline` is the number the sweep ranks by.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from bert_jax.atomic_write import write_text_atomic
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.tasks import glue, ner, squad, squad_eval, squad_predict, swag, train_tasks
from bert_jax.tasks.text_pairs import Tokenizer


@dataclasses.dataclass
class Split:
    name: str
    arrays: dict[str, np.ndarray]
    meta: Any = None  # examples / windows the outputs are mapped back onto


class Job:
    """What every job shares: a training row holds one example."""

    def rows_per_step(self, batch: int, mesh: Any) -> int:
        """The rows of a training step that hold `batch` examples (PackedJob packs several)."""
        del mesh
        return batch


def _path(cfg, name: str) -> str:
    return os.path.join(cfg.data_dir, name)


class GlueJob(Job):
    def __init__(self, cfg):
        self.cfg = cfg
        self.spec = glue.get_spec(cfg.task)

    def _read(self, split: str, tfds_split: str | None = None) -> list[glue.Example]:
        if self.cfg.get("use_tfds", False):
            return glue.read_tfds_split(self.spec, tfds_split or split, self.cfg.get("tfds_dir"))
        return glue.read_split(self.spec, self.cfg.data_dir, split)

    def load(self, tokenizer: Tokenizer) -> None:
        spec = self.spec
        feat = lambda ex: glue.featurize(spec, ex, tokenizer, self.cfg.max_seq_length)
        train = self._read("train")
        self.num_train_examples = len(train)
        self.train = feat(train)
        self.evals = []
        for split, tsplit in zip(spec.dev_splits, spec.tfds_dev, strict=True):
            ex = self._read(split, tsplit)
            self.evals.append(Split(split, feat(ex), ex))
        self.tests = []
        if self.cfg.get("do_predict", False):
            for split, sub in zip(spec.test_splits, spec.submission, strict=True):
                ex = self._read(split)  # tfds names the test splits as the files
                self.tests.append(Split(split, feat(ex), (ex, sub)))

    def train_task(self, bert: BertConfig, batch: int) -> train_tasks.ClassificationTask:
        return train_tasks.ClassificationTask(
            bert, batch, self.cfg.max_seq_length, self.spec.num_labels,
            bilstm_size=self.cfg.bilstm_size,
        )  # fmt: skip

    def _preds(self, logits_NxC: np.ndarray) -> np.ndarray:
        return logits_NxC[:, 0] if self.spec.is_regression else logits_NxC.argmax(-1)

    def score(self, split: Split, logits_NxC: np.ndarray, workdir: str) -> dict[str, float]:
        preds = self._preds(logits_NxC)
        m = glue.compute_metrics(self.spec, preds, split.arrays["labels"])
        tag = "" if len(self.evals) == 1 else split.name.replace("dev_", "_")
        out = os.path.join(workdir, f"dev{tag}_predictions.tsv")
        glue.write_submission(self.spec, split.meta, preds, out)
        return {f"{k}{tag}": v for k, v in m.items()}

    def write_test(self, split: Split, logits_NxC: np.ndarray, workdir: str) -> None:
        examples, name = split.meta
        glue.write_submission(
            self.spec, examples, self._preds(logits_NxC), os.path.join(workdir, name)
        )

    def headline(self, m: dict[str, float]) -> float:
        if self.spec.name == "mnli":
            return m["accuracy_matched"]
        return glue.headline(self.spec, m)


class SquadJob(Job):
    def __init__(self, cfg):
        self.cfg = cfg
        self.v2 = cfg.version == "v2.0"

    def load(self, tokenizer: Tokenizer) -> None:
        c = self.cfg
        kw = dict(
            max_seq_length=c.max_seq_length,
            doc_stride=c.doc_stride,
            max_query_length=c.max_query_length,
        )
        self.stats = {}
        self._pieces_to_text = getattr(tokenizer, "pieces_to_text", None)  # None: WordPiece
        ex, st = squad.read_examples(
            _path(c, c.train_file), True, self.v2, c.strict,
            skip_misaligned=c.get("skip_misaligned_answers", False),
        )  # fmt: skip
        self.train, _ = squad.featurize(ex, tokenizer, is_training=True, stats=st, **kw)
        # Steps count windows (the reference counts questions, so long contexts got < 1 epoch).
        self.num_train_examples = len(self.train["input_ids"])
        self.stats["train"] = st.as_dict()
        dev_path = _path(c, c.predict_file)
        dex, dst = squad.read_examples(dev_path, False, self.v2)
        arrays, metas = squad.featurize(dex, tokenizer, stats=dst, **kw)
        self.stats["dev"] = dst.as_dict()
        self.dataset = squad.load_dataset(dev_path)
        self.evals = [Split("dev", arrays, (dex, metas))]
        self.tests = []

    def train_task(self, bert: BertConfig, batch: int) -> train_tasks.SpanTask:
        return train_tasks.SpanTask(
            bert, batch, self.cfg.max_seq_length, bilstm_size=self.cfg.bilstm_size
        )

    def score(self, split: Split, outputs, workdir: str) -> dict[str, float]:
        examples, metas = split.meta
        c = self.cfg
        preds, nbest, odds = squad_predict.predict(
            examples,
            metas,
            outputs[0],
            outputs[1],
            version_2=self.v2,
            n_best_size=c.n_best_size,
            max_answer_length=c.max_answer_length,
            null_score_diff_threshold=c.null_score_diff_threshold,
            do_lower_case=self._lower,
            pieces_to_text=self._pieces_to_text,
        )
        squad_predict.write_json(preds, os.path.join(workdir, "predictions.json"))
        squad_predict.write_json(nbest, os.path.join(workdir, "nbest_predictions.json"))
        if self.v2:
            squad_predict.write_json(odds, os.path.join(workdir, "null_odds.json"))
            return squad_eval.evaluate_v2(self.dataset, preds, odds, c.null_score_diff_threshold)
        return squad_eval.evaluate_v1(self.dataset, preds)

    def headline(self, m: dict[str, float]) -> float:
        return m["f1"]


class NerJob(Job):
    num_labels = len(ner.LABELS)

    def __init__(self, cfg):
        self.cfg = cfg

    def _read(self, name: str, tfds_split: str) -> list[ner.Sentence]:
        if self.cfg.get("use_tfds", False):
            return ner.read_tfds(tfds_split, self.cfg.get("tfds_dir"))
        return ner.read_conll(_path(self.cfg, name))

    def load(self, tokenizer: Tokenizer) -> None:
        c = self.cfg
        sents = self._read(c.train_file, "train")
        self.num_train_examples = len(sents)
        self.train, _ = ner.featurize(sents, tokenizer, c.max_seq_length)
        dev = self._read(c.dev_file, "dev")
        arrays, windows = ner.featurize(dev, tokenizer, c.max_seq_length)
        self.evals = [Split("dev", arrays, (dev, windows))]
        self.tests = []

    def train_task(self, bert: BertConfig, batch: int) -> train_tasks.TaggingTask:
        return train_tasks.TaggingTask(
            bert, batch, self.cfg.max_seq_length, len(ner.LABELS),
            bilstm_size=self.cfg.bilstm_size,
        )  # fmt: skip

    def score(self, split: Split, logits_NxLxC: np.ndarray, workdir: str) -> dict[str, float]:
        sents, windows = split.meta
        pred = ner.word_predictions(sents, windows, logits_NxLxC.argmax(-1))
        ner.write_predictions(sents, pred, os.path.join(workdir, "dev_predictions.txt"))
        return ner.entity_f1([list(s.tags) for s in sents], pred, strict=self.cfg.strict)

    def headline(self, m: dict[str, float]) -> float:
        return m["f1"]


class SwagJob(Job):
    def __init__(self, cfg):
        self.cfg = cfg

    def load(self, tokenizer: Tokenizer) -> None:
        c = self.cfg
        train = swag.read_swag(_path(c, c.train_file))
        self.num_train_examples = len(train)
        self.train = swag.featurize(train, tokenizer, c.max_seq_length)
        dev = swag.read_swag(_path(c, c.dev_file))
        self.evals = [Split("dev", swag.featurize(dev, tokenizer, c.max_seq_length), dev)]
        self.tests = []

    def train_task(self, bert: BertConfig, batch: int) -> train_tasks.ClassificationTask:
        return train_tasks.ClassificationTask(
            bert, batch, self.cfg.max_seq_length, num_choices=swag.NUM_CHOICES
        )

    def score(self, split: Split, scores_NxC: np.ndarray, workdir: str) -> dict[str, float]:
        preds = scores_NxC.argmax(-1)
        lines = ["id\tprediction"] + [
            f"{ex.swag_id}\t{p}" for ex, p in zip(split.meta, preds, strict=True)
        ]
        write_text_atomic(os.path.join(workdir, "dev_predictions.tsv"), "\n".join(lines) + "\n")
        return {"accuracy": float(np.mean(preds == split.arrays["labels"]))}

    def headline(self, m: dict[str, float]) -> float:
        return m["accuracy"]


JOBS = {"glue": GlueJob, "squad": SquadJob, "ner": NerJob, "swag": SwagJob}


def make_job(cfg, do_lower_case: bool = True):
    if cfg.task_family not in JOBS:
        raise BertJaxError(f"config task_family {cfg.task_family!r}: use one of {sorted(JOBS)}")
    job = JOBS[cfg.task_family](cfg)
    job._lower = do_lower_case
    return job
