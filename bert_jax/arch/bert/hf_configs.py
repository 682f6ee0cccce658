"""Hugging Face `config.json` of each BERT variant <-> `BertConfig`, and which transformers class
a set of weights exports as. What differs per variant (class names, defaults, field spellings,
what its classes can hold) is the variant's (`bert_jax.arch.bert.variants`); this module applies it.
The weight names are in `names`."""

from __future__ import annotations

from typing import Any

from bert_jax.arch.bert.variants import VARIANTS, Variant, get_variant
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError


def config_from_hf(raw: dict[str, Any], source: str, **runtime: Any) -> BertConfig:
    """Our config for a Hugging Face config.json of any BERT variant (`model_type`)."""
    model_type = raw.get("model_type", "bert")
    if model_type not in VARIANTS:
        raise BertJaxError(
            f"{source}: model_type {model_type!r} is not a BERT-family model "
            f"({', '.join(VARIANTS)})"
        )
    family = VARIANTS[model_type]
    for arch in raw.get("architectures") or []:
        if not arch.startswith(family.hf_class_prefix):
            raise BertJaxError(f"{source}: architecture {arch!r} is not a {family.hf_title} model")
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise BertJaxError(f"{source}: only absolute position embeddings are supported")
    raw = {**family.hf_defaults, **raw}
    known = family.fields_from_hf(raw, source)
    if "vocab_size" not in known:
        raise BertJaxError(f"{source}: has no vocab_size")
    if raw.get("is_decoder") and not known.get("causal"):
        raise BertJaxError(
            f"{source}: a {model_type} decoder; causal attention is supported for bert"
        )
    try:
        return BertConfig(**known, family=family.name, **runtime)
    except TypeError as e:
        raise BertJaxError(f"{source}: {e}") from None


def _exportable(config: BertConfig) -> Variant:
    """The variant of `config`, once its transformers classes are known to hold it exactly."""
    if config.family not in VARIANTS:
        raise BertJaxError(f"export_hf: family {config.family!r} has no transformers classes")
    family = get_variant(config.family)
    problems = [
        f"{k}={getattr(config, k)!r} (needs {v!r})"
        for k, v in family.export_fixed.items()
        if getattr(config, k) != v
    ]
    problems += family.export_problems(config)
    if problems:
        raise BertJaxError(
            f"export_hf: transformers' {family.name} models cannot hold this config: "
            + ", ".join(problems)
        )
    return family


def architecture(config: BertConfig, groups: tuple[str, ...]) -> tuple[str, frozenset[str]]:
    """(transformers class, head groups it holds) for weights with `groups`."""
    family = _exportable(config)
    present = set(groups) - {"encoder"}
    for arch, holds, needs in family.architectures:
        if needs <= present:
            extra = present - holds
            if extra:
                raise BertJaxError(
                    f"export_hf: transformers' {arch} has no place for the "
                    f"{', '.join(sorted(extra))} head(s)"
                )
            return family.hf_class(arch, config), holds
    raise AssertionError("the base model needs no heads")


def base_class(config: BertConfig) -> str:
    """transformers' bare encoder class of `config`'s variant (BertModel, RobertaModel, ...)."""
    return get_variant(config.family).architectures[-1][0]


def hf_config(config: BertConfig, arch: str) -> dict[str, Any]:
    """transformers' config.json for `config` as `arch`."""
    out = get_variant(config.family).hf_fields(config)
    return {**out, "model_type": config.family, "architectures": [arch],
            "tie_word_embeddings": True}  # fmt: skip
