"""Pure Flax Linen BERT: encoder, heads, family presets and layout helpers."""

from bert_jax.model.bert import BertModel, BertOutput
from bert_jax.model.families import FAMILIES, family_config
from bert_jax.model.heads import (
    BertForMultipleChoice,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForReplacedTokenDetection,
    BertForSequenceClassification,
    BertForTokenClassification,
    PretrainingOutput,
)
from bert_jax.model.scan import stack_layers, unstack_layers

__all__ = [
    "FAMILIES",
    "BertForMultipleChoice",
    "BertForPreTraining",
    "BertForQuestionAnswering",
    "BertForReplacedTokenDetection",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "BertOutput",
    "PretrainingOutput",
    "family_config",
    "stack_layers",
    "unstack_layers",
]
