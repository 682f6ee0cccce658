"""ALBERT (Lan et al. 2019; ALBERT-base): embeddings of width E=128 projected to H, every layer
shared, no dropout, SOP on the pooler, a 30000-piece sentencepiece vocab, the tanh GELU. Its TF
releases keep the shared layer under `bert/encoder/transformer/group_0/inner_group_0/`."""

from __future__ import annotations

from typing import Any

from bert_jax.arch.bert.variants.base import HfNames, Variant, arches
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError

_SHARED = "^bert/encoder/shared/"
_TF_LAYER = "bert/encoder/transformer/group_0/inner_group_0/"
_HF_LAYER = "albert.encoder.albert_layer_groups.0.albert_layers.0."


class Albert(Variant):
    def fields_from_hf(self, raw: dict[str, Any], source: str) -> dict[str, Any]:
        groups = (raw.get("num_hidden_groups", 1), raw.get("inner_group_num", 1))
        if groups != (1, 1):
            raise BertJaxError(
                f"{source}: ALBERT with num_hidden_groups, inner_group_num = "
                f"{groups}; only 1, 1 (every layer shared) is supported"
            )
        known = super().fields_from_hf(raw, source)
        return {**known, "embedding_size": raw["embedding_size"], "share_layers": "all"}

    def hf_fields(self, config: BertConfig) -> dict[str, Any]:
        return {**super().hf_fields(config), "embedding_size": config.embedding_size,
                "num_hidden_groups": 1, "inner_group_num": 1}  # fmt: skip

    def export_problems(self, config: BertConfig) -> list[str]:
        problems = super().export_problems(config)
        if config.embedding_size is None:
            problems.append("embedding_size=None (needs a width)")
        return problems

    def tf_json_as_hf(self, raw: dict[str, Any], source: str) -> dict[str, Any]:
        raw = dict(raw)
        if raw.get("hidden_act", "gelu") == "gelu":
            raw["hidden_act"] = "gelu_new"  # ALBERT's modeling.gelu is the tanh form
        if raw.get("down_scale_factor", 1) != 1:
            raise BertJaxError(f"{source}: down_scale_factor != 1 is not supported")
        return raw


VARIANT = Albert(
    "albert",
    dict(
        vocab_size=30000,
        embedding_size=128,
        share_layers="all",
        hidden_act="gelu_new",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    ),
    ("mlm", "sop"),
    hf_class_prefix="Albert",
    hf_title="ALBERT",
    hf_names=HfNames(
        "albert",
        (
            (r"^bert\.encoder\.shared\.", _HF_LAYER),
            (r"\.attention\.self\.", ".attention."),
            (r"\.attention\.output\.dense\.", ".attention.dense."),
            (r"\.attention\.output\.LayerNorm\.", ".attention.LayerNorm."),
            (r"\.intermediate\.dense\.", ".ffn."),
            (r"\.output\.dense\.", ".ffn_output."),
            (r"\.output\.LayerNorm\.", ".full_layer_layer_norm."),
            (r"^bert\.pooler\.dense\.", "albert.pooler."),
            (r"^bert\.", "albert."),
            (r"^cls\.predictions\.transform\.", "predictions."),
            (r"^cls\.predictions\.bias$", "predictions.bias"),
            (r"^cls\.seq_relationship\.", "sop_classifier.classifier."),
        ),
        tied=("predictions.decoder.weight", "predictions.decoder.bias"),
        aliases=(("predictions.bias", "predictions.decoder.bias"),),
    ),
    hf_defaults={
        "embedding_size": 128,
        "hidden_act": "gelu_new",
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    },
    architectures=arches(
        ("AlbertForPreTraining", {"pooler", "mlm", "nsp"}, {"mlm", "nsp"}),
        ("AlbertForMaskedLM", {"pooler", "mlm"}, {"mlm"}),
        ("AlbertModel", {"pooler"}, set()),
    ),
    export_fixed=dict(share_layers="all", position_offset=0, pooler=True, causal=False),
    tokenizer_class="AlbertTokenizer",
    hf_sentence_head="pooler",
    tf_renames=(
        (_SHARED + "attention/self/", _TF_LAYER + "attention_1/self/"),
        (_SHARED + "attention/output/dense/", _TF_LAYER + "attention_1/output/dense/"),
        (_SHARED + "attention/output/LayerNorm/", _TF_LAYER + "LayerNorm/"),
        (_SHARED + "intermediate/dense/", _TF_LAYER + "ffn_1/intermediate/dense/"),
        (_SHARED + "output/dense/", _TF_LAYER + "ffn_1/intermediate/output/dense/"),
        (_SHARED + "output/LayerNorm/", _TF_LAYER + "LayerNorm_1/"),
    ),
    tf_marker="bert/encoder/transformer/",
    tf_config_file="albert_config.json",
)
