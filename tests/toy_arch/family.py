"""Its protocol class: what the shared pretraining task asks of it."""

from __future__ import annotations

from typing import Any, ClassVar

from bert_jax.arch.base import Architecture
from toy_arch.model import BagOfContextLM, flops_per_step


class ToyFamily(Architecture):
    name: ClassVar[str] = "toy"
    title: ClassVar[str] = "the bag-of-context toy"
    # Its sizes come from a BERT preset (`config.model`), as ModernBERT's do.
    variant_architecture: ClassVar[str] = "bert"
    refusals: ClassVar[dict[str, str]] = {"finetune": "the toy has no task heads"}

    def pretraining_model(self, bert_config: Any, objective: Any, generator_size: float) -> Any:
        return BagOfContextLM(bert_config)

    def pretraining_flops(self, task: Any, global_batch_size: int) -> float:
        return flops_per_step(task.bert_config, global_batch_size, task.max_seq_length,
                              task.max_predictions_per_seq)  # fmt: skip
