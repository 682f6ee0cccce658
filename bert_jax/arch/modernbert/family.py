"""ModernBERT (Warner et al. 2024): the pre-norm, bias-free encoder with GeGLU, rotary positions
and alternating global / sliding-window attention (`bert_jax.arch.modernbert`). Pretrains with
its own objective (masked LM at 30%, no NSP) from BERT's size presets; exports and loads Hugging
Face ModernBERT directories (ModernBertForMaskedLM and the task heads) with their tokenizer.json;
fine-tunes classification, tagging, span QA and multiple choice, and is a task-distillation
teacher (a fine-tuned workdir or a HF directory with a task head) and student. The "+ BiLSTM"
head, feature-based NER and init checkpoints for pretraining are BERT-only and refused."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from etils import epath

from bert_jax.arch.base import GENERATES, Architecture, FineTuned
from bert_jax.arch.bert import hf
from bert_jax.arch.modernbert import heads as modernbert_heads
from bert_jax.arch.modernbert import hf as modernbert_hf
from bert_jax.arch.modernbert import pretraining as modernbert_pretraining
from bert_jax.arch.modernbert.config import ModernBertConfig
from bert_jax.atomic_write import read_json_object
from bert_jax.checkpoint import read_workdir_config
from bert_jax.errors import BertJaxError
from bert_jax.interop.workdir_params import restore_workdir_params
from bert_jax.task_family_key import saved_task_family
from bert_jax.tokenization.directory import check_vocab_fits, open_tokenizer, tokenizer_file_in


@dataclasses.dataclass(frozen=True)
class ModernBertPretrained:
    """What the fine-tuning run needs of a checkpoint, as `bert_jax.interop.Pretrained` for BERT."""

    config: ModernBertConfig
    params: dict  # {"model": encoder}
    source: str
    vocab_file: epath.Path | None = None  # tokenizer.json, kept in the workdir


class ModernBertFamily(Architecture):
    name: ClassVar[str] = "modernbert"
    title: ClassVar[str] = "ModernBERT"
    hf_model_types: ClassVar[tuple[str, ...]] = ("modernbert",)
    workdir_entries: ClassVar[tuple[str, ...]] = ("modernbert",)
    config_types: ClassVar[tuple[type, ...]] = (ModernBertConfig,)
    # Sizes come from BERT's presets (`config.model`, and `config.intermediate_size`).
    variant_architecture: ClassVar[str] = "bert"
    encoder_scope: ClassVar[str] = modernbert_heads.ENCODER_SCOPE
    extracts_features: ClassVar[bool] = True
    features_reader: ClassVar[str] = "bert_jax.arch.modernbert.features"
    attention_maps: ClassVar[tuple[str, ...]] = ("encoder",)  # global and sliding-window layers
    distills_students: ClassVar[bool] = True
    distills_teachers: ClassVar[bool] = True
    converts_own_files: ClassVar[bool] = True
    refusals: ClassVar[dict[str, str]] = {
        "generate": f"ModernBERT is a bidirectional masked-LM encoder; {GENERATES}",
    }
    task_heads: ClassVar[dict[str, Any]] = {
        "classification": modernbert_heads.ModernBertForSequenceClassification,
        "multiple choice": modernbert_heads.ModernBertForMultipleChoice,
        "tagging": modernbert_heads.ModernBertForTokenClassification,
        "span QA": modernbert_heads.ModernBertForQuestionAnswering,
    }

    # ---- pretraining ------------------------------------------------------------------------
    def pretraining_model(self, bert_config: Any, objective: Any, generator_size: float) -> Any:
        return modernbert_pretraining.ModernBertPretraining(
            modernbert_pretraining.config_from_bert(bert_config)
        )

    def pretraining_flops(self, task: Any, global_batch_size: int) -> float:
        return modernbert_pretraining.flops_per_step(
            task.model.config, global_batch_size, task.max_seq_length,
            task.max_predictions_per_seq,
        )  # fmt: skip

    def pretraining_saved_elements(self, task: Any, global_batch_size: int) -> float:
        return modernbert_pretraining.saved_elements(
            task.model.config, global_batch_size, task.max_seq_length,
            task.max_predictions_per_seq,
        )  # fmt: skip

    def check_init_checkpoint(self, path: str) -> None:
        raise BertJaxError("config.init_checkpoint: not supported with objective modernbert")

    def export_pretrained(self, task: Any, params: Any, output_dir: str, vocab: Any) -> list[str]:
        out = modernbert_hf.export_pretraining_run(task.model.config, params, output_dir, vocab)
        return [f"exported Hugging Face ModernBertForMaskedLM to {out}"]

    def convert(self, init_checkpoint: str, output_dir: str, task_labels: Any) -> str:
        return modernbert_hf.convert(init_checkpoint, output_dir, task_labels)

    # ---- fine-tuning ------------------------------------------------------------------------
    def load_for_finetuning(self, cfg: Any) -> tuple[Any, ModernBertPretrained, bool]:
        path = epath.Path(cfg.init_checkpoint)
        self.refuse_bert_only_keys(cfg, path)
        vocab = epath.Path(cfg.vocab_file) if cfg.vocab_file else tokenizer_file_in(path)
        if vocab is None or not vocab.exists():
            raise BertJaxError(
                f"{vocab or path / 'tokenizer.json'}: no such file (ModernBERT's tokenizer.json; "
                "set vocab_file)"
            )
        config, params, _ = modernbert_hf.load_hf_dir(path)
        if cfg.max_seq_length > config.max_position_embeddings:
            raise BertJaxError(
                f"max_seq_length {cfg.max_seq_length} exceeds the checkpoint's "
                f"max_position_embeddings {config.max_position_embeddings}"
            )
        tokenizer = open_tokenizer(
            vocab, cfg.do_lower_case, "config do_lower_case", hf.guess_do_lower_case(path)
        )
        check_vocab_fits(tokenizer, config.vocab_size, path)
        encoder = {self.encoder_scope: params[self.encoder_scope]}
        pre = ModernBertPretrained(config, encoder, str(path), vocab)
        return tokenizer, pre, tokenizer.do_lower_case

    def workdir_record(self, pre: Any) -> dict[str, Any]:
        return {"modernbert": pre.config.to_hf_dict()}

    def encoder_flops_per_token(self, config: Any, seq_len: int) -> float:
        return modernbert_pretraining.flops_per_token(config, seq_len)

    # ---- task distillation --------------------------------------------------------------
    def fine_tuned(self, path: Any, step: int | None) -> FineTuned:
        path = epath.Path(path)
        if (path / "checkpoints").is_dir():  # a workdir fine-tuned from a ModernBERT directory
            run = read_workdir_config(path)
            config = ModernBertConfig.from_hf_dict(run["modernbert"], str(path / "config.json"))
            task_family = saved_task_family(run)
            params = modernbert_hf.unscan(restore_workdir_params(path, step), config)
            return FineTuned(
                config.replace(scan_layers=False), params, task_family, tokenizer_file_in(path),
                run.get("do_lower_case"), run.get("task", "") if task_family == "glue" else "",
            )  # fmt: skip
        config, params, architecture = modernbert_hf.load_hf_dir(path)
        heads = {arch: family for family, arch in modernbert_hf.TASK_ARCHITECTURES.items()}
        raw = read_json_object(path / "config.json", f"{path}: no config.json")
        id2label = raw.get("id2label") or {}
        return FineTuned(
            config, params, heads.get(architecture, ""), tokenizer_file_in(path),
            hf.guess_do_lower_case(path),
            label_names=tuple(str(id2label.get(str(i), "")) for i in range(len(id2label))),
        )  # fmt: skip

