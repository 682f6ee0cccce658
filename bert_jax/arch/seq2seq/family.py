"""The encoder-decoders: T5 (relative positions, RMS pre-norm), the original Transformer and its
RNN predecessor, one model (this folder) behind presets. Their runs have their own shape, so this
family names them (`task_kind = "encoder_decoder"`) rather than building encoder tasks:
pretraining is `pretraining_task` here over inputs/targets shards (span corruption, prefix LM),
fine-tuning is text-to-text (`text_to_text`), decoding is `bert-jax generate`; Hugging Face T5
directories load and export with their spiece.model (`t5_checkpoints`, `load`)."""

from __future__ import annotations

from typing import Any, ClassVar

from etils import epath

from bert_jax.arch.base import Architecture
from bert_jax.arch.seq2seq import Seq2SeqConfig
from bert_jax.arch.seq2seq.load import load_seq2seq
from bert_jax.arch.seq2seq.t5_checkpoints import check_t5_layout, export_t5
from bert_jax.checkpoint import read_workdir_config


class Seq2SeqFamily(Architecture):
    name: ClassVar[str] = "seq2seq"
    title: ClassVar[str] = "an encoder-decoder (T5)"
    hf_model_types: ClassVar[tuple[str, ...]] = ("t5",)
    workdir_entries: ClassVar[tuple[str, ...]] = ("seq2seq",)
    config_types: ClassVar[tuple[type, ...]] = (Seq2SeqConfig,)
    task_kind: ClassVar[str] = "encoder_decoder"
    generates: ClassVar[str] = "seq2seq"
    extracts_features: ClassVar[bool] = True  # the encoder's hidden states
    features_reader: ClassVar[str] = "bert_jax.arch.seq2seq.features"
    attention_maps: ClassVar[tuple[str, ...]] = ("encoder", "cross", "decoder")
    converts_own_files: ClassVar[bool] = True
    refusals: ClassVar[dict[str, str]] = {
        "distillation student": "an encoder-decoder fine-tunes text-to-text, without the task "
        "head whose logits distillation matches",
        "distillation teacher": "an encoder-decoder fine-tunes text-to-text, without the task "
        "head whose logits distillation matches",
    }

    def convert(self, init_checkpoint: str, output_dir: str, task_labels: Any) -> str:
        """A T5 directory or a seq2seq workdir (pretrained or fine-tuned text-to-text: the whole
        model is T5ForConditionalGeneration) -> a T5 directory."""
        path = epath.Path(init_checkpoint)
        if (path / "checkpoints").is_dir():  # before restoring: what transformers cannot hold
            record = read_workdir_config(path).get("seq2seq") or {}
            check_t5_layout(Seq2SeqConfig.from_dict(record, str(path / "config.json")), path)
        pre = load_seq2seq(init_checkpoint)
        cfg = pre.config
        out = export_t5(cfg, pre.params, output_dir, pre.spm_model, source=init_checkpoint)
        return (
            f"wrote {out} (T5ForConditionalGeneration, num_layers={cfg.num_layers} "
            f"d_model={cfg.d_model}; tokenizer: {pre.spm_model.name if pre.spm_model else 'none'})"
        )
