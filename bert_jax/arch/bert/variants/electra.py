"""ELECTRA (Clark et al. 2020): the discriminator is BERT's encoder without a pooler, with the
replaced-token head; its generator is the same variant with the masked-LM head. ELECTRA-base has
E = H (no projection); ELECTRA-small sets hidden_size=256, embedding_size=128. Its TF releases
name BERT's weights under `electra/` and carry no config file."""

from __future__ import annotations

from typing import Any

from bert_jax.arch.bert.variants.base import HfNames, Variant, arches
from bert_jax.config import BertConfig


class Electra(Variant):
    def fields_from_hf(self, raw: dict[str, Any], source: str) -> dict[str, Any]:
        known = super().fields_from_hf(raw, source)
        hidden = known.get("hidden_size", BertConfig.hidden_size)
        factorised = raw["embedding_size"] != hidden  # transformers projects only when E != H
        width = raw["embedding_size"] if factorised else None
        return {**known, "embedding_size": width, "pooler": False}

    def hf_fields(self, config: BertConfig) -> dict[str, Any]:
        return {**super().hf_fields(config), "embedding_size": config.embed_dim}

    def export_problems(self, config: BertConfig) -> list[str]:
        problems = super().export_problems(config)
        if config.embedding_size == config.hidden_size:
            problems.append(
                "embedding_size == hidden_size with a projection (transformers has none)"
            )
        return problems

    def tf_json_as_hf(self, raw: dict[str, Any], source: str) -> dict[str, Any]:
        raw = dict(raw)
        raw.setdefault("embedding_size", raw.get("hidden_size", BertConfig.hidden_size))
        return raw


VARIANT = Electra(
    "electra",
    dict(pooler=False),
    ("rtd",),
    generator_heads=("mlm",),
    architecture="electra",
    hf_class_prefix="Electra",
    hf_title="ELECTRA",
    hf_names=HfNames(
        "electra",
        (
            (r"^bert\.encoder\.embedding_hidden_mapping_in\.", "electra.embeddings_project."),
            (r"^bert\.", "electra."),
            (r"^cls\.predictions\.transform\.", "generator_predictions."),
            (r"^cls\.predictions\.bias$", "generator_lm_head.bias"),
        ),
        tied=("generator_lm_head.weight",),
    ),
    hf_defaults={"embedding_size": 128},
    architectures=arches(
        ("ElectraForPreTraining", {"rtd"}, {"rtd"}),
        ("ElectraForMaskedLM", {"mlm"}, {"mlm"}),
        ("ElectraModel", set(), set()),
    ),
    export_fixed=dict(share_layers="none", position_offset=0, pooler=False, causal=False),
    tokenizer_class="ElectraTokenizer",
    tf_renames=(
        (r"^bert/encoder/embedding_hidden_mapping_in/", "electra/embeddings_project/"),
        (r"^bert/", "electra/"),
        (r"^discriminator_predictions/dense_prediction/", "discriminator_predictions/dense_1/"),
    ),
    tf_marker="electra/",
)
