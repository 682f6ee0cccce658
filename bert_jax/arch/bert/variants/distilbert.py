"""DistilBERT (Sanh et al. 2019): BERT-base halved in depth, no token types, no pooler; its
transformers config spells the fields its own way (`dim`, `n_layers`, ...)."""

from __future__ import annotations

from typing import Any

from bert_jax.arch.bert.variants.base import HfNames, Variant, arches
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError

# transformers' DistilBertConfig name -> ours.
_FIELDS = {
    "dim": "hidden_size",
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "hidden_dim": "intermediate_size",
    "activation": "hidden_act",
    "dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "vocab_size": "vocab_size",
    "max_position_embeddings": "max_position_embeddings",
    "initializer_range": "initializer_range",
}


class DistilBert(Variant):
    def fields_from_hf(self, raw: dict[str, Any], source: str) -> dict[str, Any]:
        if raw.get("sinusoidal_pos_embds"):
            raise BertJaxError(f"{source}: sinusoidal position embeddings are not supported")
        known = {ours: raw[theirs] for theirs, ours in _FIELDS.items() if theirs in raw}
        return {**known, "type_vocab_size": 0, "pooler": False, "layer_norm_eps": 1e-12}

    def hf_fields(self, config: BertConfig) -> dict[str, Any]:
        out = {theirs: getattr(config, ours) for theirs, ours in _FIELDS.items()}
        return {**out, "sinusoidal_pos_embds": False, "pad_token_id": 0}

    def export_problems(self, config: BertConfig) -> list[str]:
        return []  # no token types to need


VARIANT = DistilBert(
    "distilbert",
    dict(num_hidden_layers=6, type_vocab_size=0, pooler=False),
    ("mlm",),
    distils_to="distilbert",
    hf_class_prefix="DistilBert",
    hf_title="DistilBERT",
    hf_names=HfNames(
        "distilbert",
        (
            (r"^bert\.encoder\.layer\.", "distilbert.transformer.layer."),
            (r"\.attention\.self\.query\.", ".attention.q_lin."),
            (r"\.attention\.self\.key\.", ".attention.k_lin."),
            (r"\.attention\.self\.value\.", ".attention.v_lin."),
            (r"\.attention\.output\.dense\.", ".attention.out_lin."),
            (r"\.attention\.output\.LayerNorm\.", ".sa_layer_norm."),
            (r"\.intermediate\.dense\.", ".ffn.lin1."),
            (r"\.output\.dense\.", ".ffn.lin2."),
            (r"\.output\.LayerNorm\.", ".output_layer_norm."),
            (r"^bert\.", "distilbert."),
            (r"^cls\.predictions\.transform\.dense\.", "vocab_transform."),
            (r"^cls\.predictions\.transform\.LayerNorm\.", "vocab_layer_norm."),
            (r"^cls\.predictions\.bias$", "vocab_projector.bias"),
        ),
        tied=("vocab_projector.weight",),
    ),
    architectures=arches(
        ("DistilBertForMaskedLM", {"mlm"}, {"mlm"}),
        ("DistilBertModel", set(), set()),
    ),
    export_fixed=dict(
        embedding_size=None,
        share_layers="none",
        position_offset=0,
        type_vocab_size=0,
        pooler=False,
        causal=False,
        layer_norm_eps=1e-12,
    ),
    tokenizer_class="DistilBertTokenizer",
)
