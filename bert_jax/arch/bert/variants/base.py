"""What a variant of the BERT encoder is: the `BertConfig` switches it sets, its pretraining
heads, and how its released checkpoints spell the same weights and config (Hugging Face
transformers' classes, Google's TF releases). The interop layer reads these; it knows no variant
by name.

Defaults are BERT's; a variant overrides the fields and the three config hooks it needs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bert_jax.config import BertConfig

# Fields transformers' BERT, RoBERTa, ALBERT and ELECTRA configs share with ours.
HF_COMMON = BertConfig.HF_BERT_FIELDS


@dataclasses.dataclass(frozen=True)
class HfNames:
    """How a variant's Hugging Face checkpoints name the weights (BERT's names, renamed)."""

    prefix: str  # the base model's attribute in the *For* classes ("bert", "roberta", ...)
    renames: tuple[tuple[str, str], ...] = ()  # regex substitutions of BERT's HF names, in order
    tied: tuple[str, ...] = ()  # copies of other weights (the tied decoder): never read
    aliases: tuple[tuple[str, str], ...] = ()  # (name, another spelling of the same tensor)


# (transformers class, the head groups it holds, the heads it needs), in order of preference.
Architectures = tuple[tuple[str, frozenset[str], frozenset[str]], ...]


def arches(*rows: tuple[str, set[str], set[str]]) -> Architectures:
    return tuple((cls, frozenset(holds), frozenset(needs)) for cls, holds, needs in rows)


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    switches: dict[str, Any]  # BertConfig fields at the variant's base size
    heads: tuple[str, ...]  # pretraining heads: mlm, nsp (NSP or SOP), rtd
    generator_heads: tuple[str, ...] = ()
    # The `bert_jax.arch.registry` architecture that pretrains it: "bert" (the masked-LM, sentence
    # and next-token objectives, and XLNet's sizes) or "electra" (its own objective).
    architecture: str = "bert"
    # The variant a pretraining distillation from it trains (bert_jax.pretraining.distillation);
    # "" keeps the teacher's.
    distils_to: str = ""
    # ---- Hugging Face transformers ----
    hf_class_prefix: str = "Bert"  # BertModel, BertForMaskedLM, ...
    hf_title: str = "BERT"  # in messages
    hf_names: HfNames = HfNames("bert")
    hf_defaults: dict[str, Any] = dataclasses.field(default_factory=dict)  # differ from BERT's
    architectures: Architectures = ()
    # BertConfig fields transformers' classes of this variant cannot change.
    export_fixed: dict[str, Any] = dataclasses.field(default_factory=dict)
    tokenizer_class: str = "PreTrainedTokenizerFast"
    # How its transformers sentence head (*ForSequenceClassification, *ForMultipleChoice) reads
    # the sequence: "pooler" (ours: dense on the pooled [CLS]), "dense_on_first" (RoBERTa's
    # dense + tanh on <s> then out_proj: our pooler + classifier renamed), "" (other layers).
    hf_sentence_head: str = ""
    # ---- Google's TF releases ----
    tf_renames: tuple[tuple[str, str], ...] = ()  # regex renames of the reference's TF names
    tf_marker: str = ""  # a variable-name prefix only this variant's releases have
    tf_config_file: str = "bert_config.json"

    def fields_from_hf(self, raw: dict[str, Any], source: str) -> dict[str, Any]:
        """Our BertConfig fields from a transformers config.json (defaults already merged)."""
        return {k: raw[k] for k in HF_COMMON if k in raw}

    def hf_fields(self, config: BertConfig) -> dict[str, Any]:
        """transformers' config.json fields for `config` (model_type, architectures added later)."""
        common = {k: getattr(config, k) for k in HF_COMMON}
        return {**common, "position_embedding_type": "absolute", "pad_token_id": 0}

    def export_problems(self, config: BertConfig) -> list[str]:
        """What transformers' classes of this variant cannot hold, beyond `export_fixed`."""
        return ["type_vocab_size=0 (needs >= 1)"] if not config.type_vocab_size else []

    def hf_class(self, arch: str, config: BertConfig) -> str:
        """The class an export uses for `arch` (a variant may pick a sibling by its config)."""
        return arch

    def tf_json_as_hf(self, raw: dict[str, Any], source: str) -> dict[str, Any] | None:
        """A release's JSON as a transformers config.json of this variant; None: it is the
        reference's bert_config.json, read as is."""
        return dict(raw)
