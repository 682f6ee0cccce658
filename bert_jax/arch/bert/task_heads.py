"""Task heads between our fine-tuned models and transformers' *For<Task> classes, both ways.

Out: a fine-tuned workdir's head as its class, the head's weights under Hugging Face's names and
the config.json fields (num_labels, id2label, label2id) that make its Auto classes and pipelines
report our label names. In: a Hugging Face directory's head as our head's parameters (what a
task-distillation teacher is read as).

    head = task_head(run_config, params, bert_config, labels=("neg", "pos"))  # None: pretraining
    export_hf(bert_config, params, out, vocab, lower, task=head)
    family = hf_task_family(config_json["architectures"])    # "glue", "ner", ... or ""
    params.update(read_hf_head(directory, family, bert_config, shapes, read))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from bert_jax.arch.bert.variants import VARIANTS
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.task_family_key import saved_task_family

# Fine-tuning task family -> (transformers class suffix, our head's parameter name, uses pooler)
_HEADS = {
    "glue": ("ForSequenceClassification", "classifier", True),
    "ner": ("ForTokenClassification", "classifier", False),
    "squad": ("ForQuestionAnswering", "qa_outputs", False),
    "swag": ("ForMultipleChoice", "classifier", True),
}
# Token heads (tagging, spans) are a dense layer on every token in every variant; a sentence head
# is ours where the variant's `hf_sentence_head` says so (bert_jax.arch.bert.variants): "pooler" (a
# dense layer on the pooled output) or "dense_on_first" (RoBERTa's dense + tanh on <s>, then
# out_proj: our pooler + classifier renamed). The others put extra layers in theirs.


@dataclasses.dataclass(frozen=True)
class TaskHead:
    arch: str  # e.g. BertForSequenceClassification
    tensors: dict[str, np.ndarray]  # Hugging Face name -> array in its layout
    config: dict[str, Any]  # extra config.json fields
    uses_pooler: bool


def task_head(
    run: dict,
    params: dict,
    config: BertConfig,
    source: str = "",
    labels: tuple[str, ...] = (),
    problem_type: str | None = None,
) -> TaskHead | None:
    """The head of a fine-tuned model (`run` is its workdir's config.json), or None when the run
    was not fine-tuning. `params` are unboxed, looped, without the outer {"params": ...};
    `labels` name the head's outputs (id2label), `problem_type` is transformers' field."""
    family = saved_task_family(run)
    if family not in _HEADS:
        return None
    suffix, name, uses_pooler = _HEADS[family]
    where = source or "the workdir"
    if run.get("bilstm_size") or run.get("feature_based"):
        raise BertJaxError(f"{where}: a BiLSTM head (bilstm_size/feature_based) has no "
                           "transformers class; only the plain BERT heads export")  # fmt: skip
    if config.family not in VARIANTS:
        raise BertJaxError(f"{where}: family {config.family!r} has no transformers classes")
    variant = VARIANTS[config.family]
    sentence_head = "" if config.causal else variant.hf_sentence_head
    dense_on_first = family == "glue" and sentence_head == "dense_on_first"
    if dense_on_first:  # RobertaClassificationHead = dense + tanh on <s>, then out_proj
        uses_pooler = False
    if uses_pooler and not sentence_head:  # (RoBERTa's multiple choice reads the pooler)
        ours = [f.name for f in VARIANTS.values() if f.hf_sentence_head]
        raise BertJaxError(
            f"{where}: transformers' {config.family} {suffix[3:]} head differs from ours (ours "
            f"reads the {'last token' if config.causal else 'sentence vector'}); only "
            f"{', '.join(ours)} without causal attention export it"
        )
    layer = params.get(name)
    if not isinstance(layer, dict) or "kernel" not in layer or "bias" not in layer:
        raise BertJaxError(f"{where}: the checkpoint has no {name} layer for the {family} task")
    kernel_DxC = np.asarray(layer["kernel"], np.float32)
    tensors = {
        f"{name}.weight": np.ascontiguousarray(kernel_DxC.T),  # torch Linear: [out, in]
        f"{name}.bias": np.asarray(layer["bias"], np.float32),
    }
    if dense_on_first:  # ours is the same function: pooler (dense + tanh) then the classifier
        pooler = params.get("bert", {}).get("pooler")
        if not isinstance(pooler, dict) or "kernel" not in pooler:
            raise BertJaxError(f"{where}: the checkpoint has no pooler for the {family} head")
        pooler_DxD = np.asarray(pooler["kernel"], np.float32)
        tensors = {
            "classifier.dense.weight": np.ascontiguousarray(pooler_DxD.T),
            "classifier.dense.bias": np.asarray(pooler["bias"], np.float32),
            "classifier.out_proj.weight": tensors[f"{name}.weight"],
            "classifier.out_proj.bias": tensors[f"{name}.bias"],
        }
    extra: dict[str, Any] = {}
    if labels:
        if len(labels) != kernel_DxC.shape[1]:
            raise BertJaxError(f"{where}: {name} has {kernel_DxC.shape[1]} outputs, the "
                               f"{family} task {len(labels)} labels")  # fmt: skip
        extra = {
            "num_labels": len(labels),
            "id2label": {str(i): label for i, label in enumerate(labels)},
            "label2id": {label: i for i, label in enumerate(labels)},
        }
        if problem_type:
            extra["problem_type"] = problem_type
    return TaskHead(variant.hf_class_prefix + suffix, tensors, extra, uses_pooler)


def hf_task_family(architectures: list[str]) -> str:
    """The fine-tuning task family whose head one of transformers' `architectures` is ("": none)."""
    found = (f for f, (suffix, _, _) in _HEADS.items() for a in architectures if a.endswith(suffix))
    return next(found, "")


def read_hf_head(
    where: str,
    family: str,
    config: BertConfig,
    shapes: dict[str, Any],
    read: Callable[[str], np.ndarray],
) -> dict[str, dict[str, np.ndarray]]:
    """Our head's parameters (and, for RoBERTa's sentence head, our pooler: key "pooler") from a
    Hugging Face checkpoint's head tensors (`shapes`: its names, `read`: one tensor)."""
    suffix, name, uses_pooler = _HEADS[family]
    linear = lambda n: {"kernel": np.ascontiguousarray(read(f"{n}.weight").T),
                        "bias": read(f"{n}.bias")}  # fmt: skip
    if uses_pooler:
        sentence_head = "" if config.causal else VARIANTS[config.family].hf_sentence_head
        if not sentence_head:
            ours = [f.name for f in VARIANTS.values() if f.hf_sentence_head]
            raise BertJaxError(
                f"{where}: {config.family}'s {suffix[3:]} head differs from ours (only "
                f"{', '.join(ours)} sentence heads are the same function)"
            )
        if "classifier.out_proj.weight" in shapes:  # RobertaClassificationHead
            return {"pooler": linear("classifier.dense"), name: linear("classifier.out_proj")}
    if f"{name}.weight" not in shapes:
        raise BertJaxError(f"{where}: no {name}.weight (the {suffix[3:]} head)")
    return {name: linear(name)}

