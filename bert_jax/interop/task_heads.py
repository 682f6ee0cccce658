"""The task head of a fine-tuned workdir as transformers' *For<Task> class: which class, the head's
weights under Hugging Face's names and the config.json fields (num_labels, id2label, label2id) that
make its Auto classes and pipelines report our label names.

    head = task_head(run_config, params, bert_config, labels=("neg", "pos"))  # None: pretraining
    export_hf(bert_config, params, out, vocab, lower, task=head)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError

# Fine-tuning config family -> (transformers class suffix, our head's parameter name, uses pooler)
_HEADS = {
    "glue": ("ForSequenceClassification", "classifier", True),
    "ner": ("ForTokenClassification", "classifier", False),
    "squad": ("ForQuestionAnswering", "qa_outputs", False),
    "swag": ("ForMultipleChoice", "classifier", True),
}
# Families whose transformers heads are exactly ours: a dense layer on the pooled output (sentence
# tasks) or on every token (tagging, spans). The others put extra layers in their sentence heads;
# RoBERTa's sequence classifier (dense + tanh on <s>, out_proj) is our pooler + classifier renamed.
_SENTENCE_FAMILIES = ("bert", "albert", "roberta")
_CLASS_PREFIX = {
    "bert": "Bert",
    "roberta": "Roberta",
    "albert": "Albert",
    "electra": "Electra",
    "distilbert": "DistilBert",
}


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
    family = run.get("family")
    if family not in _HEADS:
        return None
    suffix, name, uses_pooler = _HEADS[family]
    where = source or "the workdir"
    if run.get("bilstm_size") or run.get("feature_based"):
        raise BertJaxError(f"{where}: a BiLSTM head (bilstm_size/feature_based) has no "
                           "transformers class; only the plain BERT heads export")  # fmt: skip
    if config.family not in _CLASS_PREFIX:
        raise BertJaxError(f"{where}: family {config.family!r} has no transformers classes")
    roberta_sentence = family == "glue" and config.family == "roberta" and not config.causal
    if roberta_sentence:  # RobertaClassificationHead = dense + tanh on <s>, then out_proj
        uses_pooler = False
    if uses_pooler and (config.family not in _SENTENCE_FAMILIES or config.causal):
        raise BertJaxError(
            f"{where}: transformers' {config.family} {suffix[3:]} head differs from ours (ours "
            f"reads the {'last token' if config.causal else 'sentence vector'}); only "
            f"{', '.join(_SENTENCE_FAMILIES)} without causal attention export it"
        )
    layer = params.get(name)
    if not isinstance(layer, dict) or "kernel" not in layer or "bias" not in layer:
        raise BertJaxError(f"{where}: the checkpoint has no {name} layer for the {family} task")
    kernel_DxC = np.asarray(layer["kernel"], np.float32)
    tensors = {
        f"{name}.weight": np.ascontiguousarray(kernel_DxC.T),  # torch Linear: [out, in]
        f"{name}.bias": np.asarray(layer["bias"], np.float32),
    }
    if roberta_sentence:  # ours is the same function: pooler (dense + tanh) then the classifier
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
    return TaskHead(_CLASS_PREFIX[config.family] + suffix, tensors, extra, uses_pooler)
