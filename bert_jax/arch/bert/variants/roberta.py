"""RoBERTa (Liu et al. 2019): BERT's encoder with a byte-level BPE vocab of 50265, positions
offset past the padding id 1 (514 of them for 512 tokens), one token type, LayerNorm eps 1e-5,
no NSP."""

from __future__ import annotations

from typing import Any

from bert_jax.arch.bert.variants.base import HfNames, Variant, arches
from bert_jax.config import BertConfig


class Roberta(Variant):
    def fields_from_hf(self, raw: dict[str, Any], source: str) -> dict[str, Any]:
        offset = int(raw["pad_token_id"]) + 1
        return {**super().fields_from_hf(raw, source), "position_offset": offset}

    def hf_fields(self, config: BertConfig) -> dict[str, Any]:
        out = super().hf_fields(config)
        return {**out, "pad_token_id": config.position_offset - 1, "bos_token_id": 0,
                "eos_token_id": 2}  # fmt: skip

    def export_problems(self, config: BertConfig) -> list[str]:
        problems = super().export_problems(config)
        if not config.position_offset:
            problems.append("position_offset=0 (needs padding id + 1)")
        return problems


VARIANT = Roberta(
    "roberta",
    dict(
        vocab_size=50265,
        max_position_embeddings=514,
        position_offset=2,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
    ),
    ("mlm",),
    hf_class_prefix="Roberta",
    hf_title="RoBERTa",
    hf_names=HfNames(
        "roberta",
        (
            (r"^bert\.", "roberta."),
            (r"^cls\.predictions\.transform\.dense\.", "lm_head.dense."),
            (r"^cls\.predictions\.transform\.LayerNorm\.", "lm_head.layer_norm."),
            (r"^cls\.predictions\.bias$", "lm_head.bias"),
        ),
        tied=("lm_head.decoder.weight", "lm_head.decoder.bias"),
        aliases=(("lm_head.bias", "lm_head.decoder.bias"),),
    ),
    hf_defaults={"pad_token_id": 1, "layer_norm_eps": 1e-12},
    architectures=arches(
        ("RobertaForMaskedLM", {"pooler", "mlm"}, {"mlm"}),
        ("RobertaModel", {"pooler"}, set()),
    ),
    export_fixed=dict(embedding_size=None, share_layers="none", causal=False),
    tokenizer_class="RobertaTokenizer",
    hf_sentence_head="dense_on_first",
)
