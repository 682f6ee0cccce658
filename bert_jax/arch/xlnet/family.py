"""XLNet: the permutation LM with two-stream attention (`bert_jax.arch.xlnet`). Pretrains from
the reference shards with BERT's size presets, exports XLNetLMHeadModel, loads Hugging Face XLNet
directories (and workdirs fine-tuned from them) with their sentencepiece tokenizer, and
fine-tunes classification, tagging and span QA with XLNet's own heads on left-padded rows.
Multiple choice, the "+ BiLSTM" head, feature-based NER and init checkpoints for pretraining are
BERT-only and refused."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
from etils import epath

from bert_jax.arch.base import GENERATES, STUDENT_IS_BERT, TEACHER_IS_BERT, Architecture
from bert_jax.arch.bert import hf
from bert_jax.arch.xlnet import XLNetConfig
from bert_jax.arch.xlnet import heads as xlnet_heads
from bert_jax.arch.xlnet import pretraining as xlnet_pretraining
from bert_jax.arch.xlnet.checkpoints import (
    convert_xlnet,
    export_xlnet,
    read_xlnet_dir,
    xlnet_task_head,
)
from bert_jax.errors import BertJaxError
from bert_jax.tokenization.directory import (
    check_vocab_fits,
    open_xlnet_tokenizer,
    tokenizer_file_in,
)


@dataclasses.dataclass(frozen=True)
class XLNetPretrained:
    """What the fine-tuning run needs of a checkpoint, as `bert_jax.interop.Pretrained` for BERT."""

    config: XLNetConfig
    params: dict  # {"transformer": encoder}
    source: str
    vocab_file: epath.Path | None = None  # spiece.model or tokenizer.json, kept in the workdir


class XLNetFamily(Architecture):
    name: ClassVar[str] = "xlnet"
    title: ClassVar[str] = "XLNet"
    hf_model_types: ClassVar[tuple[str, ...]] = ("xlnet",)
    workdir_entries: ClassVar[tuple[str, ...]] = ("xlnet",)
    config_types: ClassVar[tuple[type, ...]] = (XLNetConfig,)
    # Sizes come from BERT's encoder variants (`bert_jax.arch.xlnet.pretraining`).
    variant_architecture: ClassVar[str] = "bert"
    padding_side: ClassVar[str] = "left"
    encoder_scope: ClassVar[str] = "transformer"
    extracts_features: ClassVar[bool] = True  # the content stream
    features_reader: ClassVar[str] = "bert_jax.arch.xlnet.features"
    converts_own_files: ClassVar[bool] = True
    refusals: ClassVar[dict[str, str]] = {
        "generate": f"XLNet's permutation LM is not decoded here; {GENERATES}",
        "distillation student": STUDENT_IS_BERT,
        "distillation teacher": TEACHER_IS_BERT,
    }
    attention_maps: ClassVar[tuple[str, ...]] = ("encoder",)  # the content stream's
    task_heads: ClassVar[dict[str, Any]] = {
        "classification": xlnet_heads.XLNetForSequenceClassification,
        "tagging": xlnet_heads.XLNetForTokenClassification,
        "span QA": xlnet_heads.XLNetForQuestionAnsweringSimple,
    }

    # ---- pretraining ------------------------------------------------------------------------
    def pretraining_model(self, bert_config: Any, objective: Any, generator_size: float) -> Any:
        return xlnet_pretraining.model_for(bert_config)

    def pretraining_inputs(self, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
        return xlnet_pretraining.model_inputs(batch)

    def pretraining_flops(self, task: Any, global_batch_size: int) -> float:
        return xlnet_pretraining.flops_per_step(
            task.model.config, global_batch_size, task.max_seq_length,
            task.max_predictions_per_seq,
        )  # fmt: skip

    def check_init_checkpoint(self, path: str) -> None:
        raise BertJaxError("config.init_checkpoint: not supported with objective permutation_lm")

    def export_pretrained(self, task: Any, params: Any, output_dir: str, vocab: Any) -> list[str]:
        out = export_xlnet(task.model.config, params, output_dir)
        return [f"exported Hugging Face XLNetLMHeadModel to {out}"]

    # ---- fine-tuning ------------------------------------------------------------------------
    def convert(self, init_checkpoint: str, output_dir: str, task_labels: Any) -> str:
        """A workdir fine-tuned from an XLNet directory exports its head as XLNetFor<Task>."""

        def task_of(run: dict, params: dict) -> Any:
            return xlnet_task_head(run, params, init_checkpoint, *task_labels(run))

        return convert_xlnet(init_checkpoint, output_dir, task_of)

    def load_for_finetuning(self, cfg: Any) -> tuple[Any, XLNetPretrained, bool]:
        path = epath.Path(cfg.init_checkpoint)
        self.refuse_bert_only_keys(cfg, path)
        spiece = epath.Path(cfg.vocab_file) if cfg.vocab_file else tokenizer_file_in(path)
        if spiece is None or not spiece.exists():
            raise BertJaxError(
                f"{spiece or path / 'spiece.model'}: no such file (XLNet's sentencepiece model "
                "or tokenizer.json; set vocab_file)"
            )
        config, params, _ = read_xlnet_dir(path)
        # XLNet's releases are cased: unset means the directory's setting, else cased.
        tokenizer = open_xlnet_tokenizer(spiece, cfg.do_lower_case, hf.guess_do_lower_case(path))
        check_vocab_fits(tokenizer, config.vocab_size, path)
        pre = XLNetPretrained(config, {"transformer": params["transformer"]}, str(path), spiece)
        return tokenizer, pre, tokenizer.do_lower_case

    def workdir_record(self, pre: Any) -> dict[str, Any]:
        return {"xlnet": pre.config.to_hf()}

    def encoder_flops_per_token(self, config: Any, seq_len: int) -> float:
        return xlnet_pretraining.content_flops_per_token(config, seq_len)

