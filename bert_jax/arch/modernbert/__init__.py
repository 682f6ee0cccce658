"""ModernBERT (Warner et al. 2024): config, encoder, heads, and what pretraining needs."""

from bert_jax.arch.modernbert.config import ModernBertConfig, preset
from bert_jax.arch.modernbert.heads import (
    ModernBertForMaskedLM,
    ModernBertForMultipleChoice,
    ModernBertForQuestionAnswering,
    ModernBertForSequenceClassification,
    ModernBertForTokenClassification,
)
from bert_jax.arch.modernbert.model import ModernBertModel

__all__ = [
    "ModernBertConfig", "ModernBertForMaskedLM", "ModernBertForMultipleChoice",
    "ModernBertForQuestionAnswering", "ModernBertForSequenceClassification",
    "ModernBertForTokenClassification", "ModernBertModel", "preset",
]  # fmt: skip
