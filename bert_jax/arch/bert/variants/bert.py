"""BERT (Devlin et al. 2018), the defaults every other variant changes; with `causal=True` the
left-to-right LM of the paper's ablation (transformers' BertLMHeadModel, `is_decoder`)."""

from __future__ import annotations

from typing import Any

from bert_jax.arch.bert.variants.base import HfNames, Variant, arches
from bert_jax.config import BertConfig


class Bert(Variant):
    def fields_from_hf(self, raw: dict[str, Any], source: str) -> dict[str, Any]:
        # causal: our earlier exports' field; is_decoder: transformers'.
        causal = bool(raw.get("is_decoder", raw.get("causal", False)))
        return {**super().fields_from_hf(raw, source), "causal": causal}

    def hf_fields(self, config: BertConfig) -> dict[str, Any]:
        return config.to_hf_dict()

    def hf_class(self, arch: str, config: BertConfig) -> str:
        return "BertLMHeadModel" if arch == "BertForMaskedLM" and config.causal else arch

    def tf_json_as_hf(self, raw: dict[str, Any], source: str) -> None:
        return None


VARIANT = Bert(
    "bert",
    {},
    ("mlm", "nsp"),
    distils_to="distilbert",
    hf_names=HfNames(
        "bert",
        tied=("cls.predictions.decoder.weight",),
        aliases=(("cls.predictions.bias", "cls.predictions.decoder.bias"),),
    ),
    architectures=arches(
        ("BertForPreTraining", {"pooler", "mlm", "nsp"}, {"mlm", "nsp"}),
        ("BertForMaskedLM", {"pooler", "mlm"}, {"mlm"}),
        ("BertModel", {"pooler"}, set()),
    ),
    export_fixed=dict(embedding_size=None, share_layers="none", position_offset=0),
    tokenizer_class="BertTokenizer",
    hf_sentence_head="pooler",
)
