"""A fine-tuned teacher: a fine-tuning workdir of ours or a Hugging Face directory whose model has
a task head (*ForSequenceClassification, *ForTokenClassification, *ForQuestionAnswering), as the
task model of `bert_jax.tasks.train_tasks` with its weights, tokenizer and task family. Which
architectures teach is the registry's (`distills_teachers`); one with its own reader (ModernBERT)
gives it as `fine_tuned`, the BERT family's is here.

    teacher = load_teacher(path, cfg)        # checks it fits the fine-tuning config `cfg`
    task = teacher.task(max_seq_length, batch)   # task.predict(teacher.params, batch) -> logits
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
from etils import epath

from bert_jax.arch import registry
from bert_jax.arch.base import FineTuned
from bert_jax.arch.bert.hf import _open_weights
from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.arch.bert.task_heads import hf_task_family, read_hf_head
from bert_jax.atomic_write import read_json_object
from bert_jax.checkpoint import read_workdir_config, restore_params
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.task_family_key import saved_task_family
from bert_jax.tasks import glue, ner, train_tasks
from bert_jax.tokenization.directory import LOOKED_FOR, open_tokenizer, tokenizer_file_in

DISTILLABLE = ("glue", "ner", "squad")


@dataclasses.dataclass(frozen=True)
class Teacher:
    config: BertConfig  # or the config of another architecture that teaches (ModernBertConfig)
    params: dict  # the task model's, unboxed, looped layout, float32
    task_family: str  # glue | ner | squad
    num_outputs: int  # classes per example (glue), per token (ner); 2 (start, end) for squad
    vocab_file: epath.Path
    do_lower_case: bool | None
    source: str
    glue_task: str = ""  # the GLUE task it was fine-tuned on, where the workdir records it

    def task(self, max_seq_length: int, batch: int):
        """The teacher's task model (the same class fine-tuning trained)."""
        c = self.config
        if self.task_family == "glue":
            return train_tasks.ClassificationTask(c, batch, max_seq_length, self.num_outputs)
        if self.task_family == "ner":
            return train_tasks.TaggingTask(c, batch, max_seq_length, self.num_outputs)
        return train_tasks.SpanTask(c, batch, max_seq_length)

    def tokenizer(self, do_lower_case: bool | None):
        return open_tokenizer(
            self.vocab_file, do_lower_case, "config do_lower_case", self.do_lower_case
        )


def vocab_fingerprint(vocab_file: str | epath.Path) -> str:
    """sha256 of the tokenizer file: a student shares the teacher's tokenization iff equal."""
    return hashlib.sha256(epath.Path(vocab_file).read_bytes()).hexdigest()


def _outputs_of(params: dict, name: str, where: str) -> int:
    layer = params.get(name)
    if not isinstance(layer, dict) or "kernel" not in layer:
        raise BertJaxError(f"{where}: the checkpoint has no {name} layer (no task head)")
    return int(np.shape(layer["kernel"])[-1])


def _from_workdir(path: epath.Path, step: int | None, family: str) -> Teacher:
    run = read_workdir_config(path)
    if "bert" not in run:
        raise BertJaxError(f"{path}: only BERT-family teachers label data (no 'bert' config)")
    config, params = restore_params(path, step)
    params = dict(params.get("params", params))
    head = "qa_outputs" if family == "squad" else "classifier"
    outputs = _outputs_of(params, head, str(path))
    vocab = tokenizer_file_in(path)
    if vocab is None:
        raise BertJaxError(f"{path}: has no tokenizer ({LOOKED_FOR})")
    return Teacher(
        config=config.replace(scan_layers=False),
        params=params,
        task_family=family,
        num_outputs=2 if family == "squad" else outputs,
        vocab_file=vocab,
        do_lower_case=run.get("do_lower_case"),
        source=str(path),
        glue_task=run.get("task", "") if family == "glue" else "",
    )


def _check_ner_labels(path: epath.Path, names: list[str]) -> None:
    if names and not all(n.startswith("LABEL_") for n in names) and tuple(names) != ner.LABELS:
        raise BertJaxError(
            f"{path}: id2label {names} is not CoNLL-2003's label order {list(ner.LABELS)}"
        )


def _check_workdir_run(path: epath.Path) -> str:
    """The task family of a fine-tuning workdir that can teach (any architecture)."""
    run = read_workdir_config(path)
    family = saved_task_family(run)
    if family not in DISTILLABLE:
        raise BertJaxError(
            f"{path}: not a fine-tuned model (its config.json has task_family={family!r}); a "
            f"teacher needs a task head: fine-tune it on {'/'.join(DISTILLABLE)} first"
        )
    if run.get("feature_based") or run.get("bilstm_size"):
        raise BertJaxError(f"{path}: a BiLSTM head (bilstm_size/feature_based) cannot teach; "
                           "only the plain task heads do")  # fmt: skip
    return family


def _from_family(path: epath.Path, model: FineTuned) -> Teacher:
    """A teacher from an architecture's own reader (`Architecture.fine_tuned`)."""
    if not model.task_family:
        raise BertJaxError(
            f"{path}: no task head; a teacher is a *ForSequenceClassification, "
            "*ForTokenClassification or *ForQuestionAnswering model"
        )
    if model.task_family not in DISTILLABLE:
        raise BertJaxError(f"{path}: a {model.task_family} head cannot teach; distillation "
                           f"covers {'/'.join(DISTILLABLE)}")  # fmt: skip
    if model.task_family == "ner":
        _check_ner_labels(path, list(model.label_names))
    if model.vocab_file is None:
        raise BertJaxError(f"{path}: has no tokenizer ({LOOKED_FOR})")
    # (ModernBERT names every head's output layer `classifier`, its span head's too)
    outputs = _outputs_of(model.params, "classifier", str(path))
    return Teacher(
        config=model.config,
        params=model.params,
        task_family=model.task_family,
        num_outputs=2 if model.task_family == "squad" else outputs,
        vocab_file=epath.Path(model.vocab_file),
        do_lower_case=model.do_lower_case,
        source=str(path),
        glue_task=model.glue_task,
    )


def _from_hf(path: epath.Path) -> Teacher:
    missing = f"{path}: no config.json (not a Hugging Face model)"
    raw = read_json_object(path / "config.json", missing)
    archs = raw.get("architectures") or []
    family = hf_task_family(archs)
    if family not in DISTILLABLE:
        raise BertJaxError(
            f"{path}: no task head (architectures: {', '.join(archs) or 'none'}); a teacher is "
            "a *ForSequenceClassification, *ForTokenClassification or *ForQuestionAnswering model"
        )
    pre = load_pretrained(path)
    _, shapes, read = _open_weights(path)
    head = read_hf_head(f"{path}: {archs[0]}", family, pre.config, shapes, read)
    params = dict(pre.params)
    if "pooler" in head:
        params["bert"] = dict(params["bert"], pooler=head.pop("pooler"))
    params.update(head)
    if family == "ner":
        id2label = raw.get("id2label") or {}
        _check_ner_labels(path, [id2label.get(str(i), "") for i in range(len(id2label))])
    if pre.vocab_file is None:
        raise BertJaxError(f"{path}: has no tokenizer ({LOOKED_FOR})")
    outputs = 2 if family == "squad" else int(params["classifier"]["kernel"].shape[-1])
    return Teacher(
        config=pre.config,
        params=params,
        task_family=family,
        num_outputs=outputs,
        vocab_file=pre.vocab_file,
        do_lower_case=pre.do_lower_case,
        source=str(path),
    )


def load_teacher(path: str, cfg, step: int | None = None) -> Teacher:
    """The teacher at `path`, checked against the fine-tuning config `cfg` (its task family,
    its GLUE task's number of labels, its max_seq_length) before any data is read."""
    if not path:
        raise BertJaxError("--teacher is empty: give a fine-tuned workdir or a HF dir")
    p = epath.Path(path)
    if not p.is_dir():
        raise BertJaxError(f"{path}: no such teacher directory")
    if not (p / "checkpoints").is_dir() and (p / "runs").is_dir():
        raise BertJaxError(
            f"{path}: a sweep or multi-seed workdir; give one run's directory "
            f"(e.g. {path}/runs/<point>/seed<s>)"
        )
    workdir = (p / "checkpoints").is_dir()
    arch = registry.for_checkpoint(p) or registry.get("bert")
    if not arch.distills_teachers:
        raise BertJaxError(
            f"{path}: {arch.title} does not teach: {arch.refusal('distillation teacher')}"
        )
    run_family = _check_workdir_run(p) if workdir else ""  # before the weights are read
    own = arch.fine_tuned(p, step)
    if own is not None:
        teacher = _from_family(p, own)
    else:
        teacher = _from_workdir(p, step, run_family) if workdir else _from_hf(p)
    family = cfg.task_family
    if family not in DISTILLABLE:
        raise BertJaxError(f"config task_family {family!r}: distillation covers {DISTILLABLE}")
    if teacher.task_family != family:
        raise BertJaxError(
            f"{path}: the teacher's head is for {teacher.task_family}, the config is {family} "
            "(task mismatch)"
        )
    if family == "glue":
        spec = glue.get_spec(cfg.task)
        if teacher.glue_task and teacher.glue_task != cfg.task:
            raise BertJaxError(
                f"{path}: fine-tuned on {teacher.glue_task}, the config is {cfg.task} "
                "(task mismatch)"
            )
        if teacher.num_outputs != spec.num_labels:
            raise BertJaxError(
                f"{path}: the teacher's head has {teacher.num_outputs} outputs, {cfg.task} "
                f"{spec.num_labels} labels (task mismatch)"
            )
    elif family == "ner" and teacher.num_outputs != len(ner.LABELS):
        raise BertJaxError(
            f"{path}: the teacher tags {teacher.num_outputs} labels, CoNLL-2003 has "
            f"{len(ner.LABELS)} (task mismatch)"
        )
    config = teacher.config  # BertConfig's limit allows for RoBERTa's position offset
    limit = getattr(config, "max_sequence_length", None) or config.max_position_embeddings
    if cfg.max_seq_length > limit:
        raise BertJaxError(
            f"max_seq_length {cfg.max_seq_length} exceeds the teacher's positions ({limit})"
        )
    return teacher
