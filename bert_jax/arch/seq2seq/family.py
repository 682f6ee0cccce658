"""The encoder-decoders: T5 (relative positions, RMS pre-norm), the original Transformer and its
RNN predecessor, one model (this folder) behind presets. Their runs have their own shape, so this
family names them (`task_kind = "encoder_decoder"`) rather than building encoder tasks:
pretraining is `pretraining_task` here over inputs/targets shards (span corruption, prefix LM),
fine-tuning is text-to-text (`text_to_text`), decoding is `bert-jax generate`; Hugging Face T5
directories load and export with their spiece.model (`t5_checkpoints`, `load`)."""

from __future__ import annotations

from typing import ClassVar

from bert_jax.arch.base import Architecture
from bert_jax.arch.seq2seq import Seq2SeqConfig


class Seq2SeqFamily(Architecture):
    name: ClassVar[str] = "seq2seq"
    title: ClassVar[str] = "an encoder-decoder (T5)"
    hf_model_types: ClassVar[tuple[str, ...]] = ("t5",)
    workdir_entries: ClassVar[tuple[str, ...]] = ("seq2seq",)
    config_types: ClassVar[tuple[type, ...]] = (Seq2SeqConfig,)
    task_kind: ClassVar[str] = "encoder_decoder"
    generates: ClassVar[str] = "seq2seq"
    extracts_features: ClassVar[bool] = True  # the encoder's hidden states
    attention_maps: ClassVar[tuple[str, ...]] = ("encoder", "cross", "decoder")
    refusals: ClassVar[dict[str, str]] = {
        "distillation student": "an encoder-decoder fine-tunes text-to-text, without the task "
        "head whose logits distillation matches",
        "distillation teacher": "an encoder-decoder fine-tunes text-to-text, without the task "
        "head whose logits distillation matches",
    }
