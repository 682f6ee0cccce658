"""The BERT encoder family: BERT, RoBERTa, ALBERT, DistilBERT and the left-to-right (causal)
BERT, as presets of one encoder (`bert_jax.arch.bert.variants`). Pretrains with the masked-LM,
sentence-pair and next-token objectives; loads our workdirs, Hugging Face directories and
Google's TF checkpoints (`bert_jax.interop`); fine-tunes with every task head, the "+ BiLSTM"
arm and feature extraction."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from bert_jax.arch.base import Architecture
from bert_jax.arch.bert import flops
from bert_jax.arch.bert.bilstm import BertWithBiLSTM
from bert_jax.arch.bert.heads import (
    BertForMultipleChoice,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bert_jax.arch.bert.hf import export_hf
from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.errors import BertJaxError
from bert_jax.tokenization.directory import LOOKED_FOR, check_vocab_fits, open_tokenizer


class BertFamily(Architecture):
    name: ClassVar[str] = "bert"
    title: ClassVar[str] = "the BERT family"
    workdir_entries: ClassVar[tuple[str, ...]] = ("bert",)
    variant_architecture: ClassVar[str] = "bert"
    extracts_features: ClassVar[bool] = True
    features_reader: ClassVar[str] = "bert_jax.arch.bert.features"
    attention_maps: ClassVar[tuple[str, ...]] = ("encoder",)
    distills_students: ClassVar[bool] = True
    distills_teachers: ClassVar[bool] = True
    generates: ClassVar[str] = "causal"  # the left-to-right BERT (objective ltr)

    # ---- pretraining ------------------------------------------------------------------------
    def pretraining_model(self, bert_config: Any, objective: Any, generator_size: float) -> Any:
        return BertForPreTraining(bert_config, use_nsp=objective.sentence_head is not None)

    def pretraining_flops(self, task: Any, global_batch_size: int) -> float:
        return flops.pretraining_flops_per_step(
            task.bert_config, global_batch_size, task.max_seq_length, _predictions(task),
            task.uses_sentence_head,
        )  # fmt: skip

    def pretraining_saved_elements(self, task: Any, global_batch_size: int) -> float:
        return flops.pretraining_saved_elements(
            task.bert_config, global_batch_size, task.max_seq_length, _predictions(task)
        )

    def export_pretrained(self, task: Any, params: Any, output_dir: str, vocab: Any) -> list[str]:
        out = export_hf(task.bert_config, params, output_dir, vocab_file=vocab)
        return [f"exported Hugging Face model to {out}"]

    # ---- fine-tuning ------------------------------------------------------------------------
    def load_for_finetuning(self, cfg: Any) -> tuple[Any, Any, bool]:
        step = cfg.get("init_checkpoint_step") or None
        pre = load_pretrained(cfg.init_checkpoint, vocab_file=cfg.vocab_file or None, step=step)
        pre = bottom_layers(pre, cfg.init_num_layers)
        vocab = cfg.vocab_file or pre.vocab_file
        if not vocab:
            raise BertJaxError(
                f"{cfg.init_checkpoint}: has no tokenizer ({LOOKED_FOR}); set --config.vocab_file"
            )
        if cfg.max_seq_length > pre.config.max_sequence_length:
            offset = pre.config.position_offset
            raise BertJaxError(
                f"max_seq_length {cfg.max_seq_length} exceeds the checkpoint's "
                f"max_position_embeddings {pre.config.max_position_embeddings}"
                + (f" - position_offset {offset}" if offset else "")
            )
        # vocab.txt / spiece.model follow do_lower_case (else the checkpoint's); RoBERTa's
        # byte-level BPE and a tokenizer.json keep their own rule; a contradiction is refused.
        tokenizer = open_tokenizer(
            vocab, cfg.do_lower_case, "config do_lower_case", pre.do_lower_case
        )
        check_vocab_fits(tokenizer, pre.config.vocab_size, cfg.init_checkpoint)
        return tokenizer, pre, tokenizer.do_lower_case

    def classifier(self, config: Any, num_labels: int, bilstm_size: int = 0) -> Any:
        if bilstm_size:
            return BertWithBiLSTM(config, num_labels, "sentence", bilstm_size)
        return BertForSequenceClassification(config, num_labels)

    def multiple_choice(self, config: Any, bilstm_size: int = 0) -> Any:
        if bilstm_size:
            raise BertJaxError("bilstm_size: not supported for multiple choice")
        return BertForMultipleChoice(config)

    def tagger(self, config: Any, num_labels: int, bilstm_size: int = 0) -> Any:
        if bilstm_size:
            return BertWithBiLSTM(config, num_labels, "token", bilstm_size)
        return BertForTokenClassification(config, num_labels)

    def span_model(self, config: Any, bilstm_size: int = 0) -> Any:
        if bilstm_size:
            return BertWithBiLSTM(config, 2, "span", bilstm_size)
        return BertForQuestionAnswering(config)

    def encoder_flops_per_token(self, config: Any, seq_len: int) -> float:
        return flops.encoder_flops_per_token(config, seq_len)


def bottom_layers(pre: Any, n: int) -> Any:
    """The checkpoint with only its bottom `n` encoder layers (0: all): a compact student from a
    deeper pretrained model (`graft_encoder` copies the layers the task model has)."""
    if not n:
        return pre
    if not 1 <= n <= pre.config.num_hidden_layers:
        raise BertJaxError(
            f"config init_num_layers={n}: the checkpoint has {pre.config.num_hidden_layers} layers"
        )
    return dataclasses.replace(pre, config=pre.config.replace(num_hidden_layers=n))


def _predictions(task: Any) -> int:
    """Masked positions per sequence the pretraining task's objective scores."""
    return task.spec.predictions_per_seq(task.max_seq_length, task.max_predictions_per_seq)
