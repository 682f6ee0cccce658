"""Hugging Face `config.json` of each family <-> `BertConfig`, and which transformers class a
set of weights exports as. The weight names are in `names.HF_FAMILIES`."""

from __future__ import annotations

from typing import Any

from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError

# Fields transformers' BERT, RoBERTa, ALBERT and ELECTRA configs share with ours.
_COMMON = BertConfig.HF_BERT_FIELDS
# DistilBERT's spelling of them.
_DISTILBERT = {
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
# Defaults of transformers' config classes that differ from BERT's (a config.json may omit them).
_HF_DEFAULTS = {
    "roberta": {"pad_token_id": 1, "layer_norm_eps": 1e-12},
    "albert": {
        "embedding_size": 128,
        "hidden_act": "gelu_new",
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    },
    "electra": {"embedding_size": 128},
}
# Per family, in order of preference: (class, the head groups it holds, the heads it needs).
ARCHITECTURES: dict[str, tuple[tuple[str, frozenset[str], frozenset[str]], ...]] = {
    "bert": (
        ("BertForPreTraining", frozenset({"pooler", "mlm", "nsp"}), frozenset({"mlm", "nsp"})),
        ("BertForMaskedLM", frozenset({"pooler", "mlm"}), frozenset({"mlm"})),
        ("BertModel", frozenset({"pooler"}), frozenset()),
    ),
    "roberta": (
        ("RobertaForMaskedLM", frozenset({"pooler", "mlm"}), frozenset({"mlm"})),
        ("RobertaModel", frozenset({"pooler"}), frozenset()),
    ),
    "albert": (
        ("AlbertForPreTraining", frozenset({"pooler", "mlm", "nsp"}), frozenset({"mlm", "nsp"})),
        ("AlbertForMaskedLM", frozenset({"pooler", "mlm"}), frozenset({"mlm"})),
        ("AlbertModel", frozenset({"pooler"}), frozenset()),
    ),
    "electra": (
        ("ElectraForPreTraining", frozenset({"rtd"}), frozenset({"rtd"})),
        ("ElectraForMaskedLM", frozenset({"mlm"}), frozenset({"mlm"})),
        ("ElectraModel", frozenset(), frozenset()),
    ),
    "distilbert": (
        ("DistilBertForMaskedLM", frozenset({"mlm"}), frozenset({"mlm"})),
        ("DistilBertModel", frozenset(), frozenset()),
    ),
}
# (class-name prefix, name in messages)
_NAMES = {
    "bert": ("Bert", "BERT"),
    "roberta": ("Roberta", "RoBERTa"),
    "albert": ("Albert", "ALBERT"),
    "electra": ("Electra", "ELECTRA"),
    "distilbert": ("DistilBert", "DistilBERT"),
}


def config_from_hf(raw: dict[str, Any], source: str, **runtime: Any) -> BertConfig:
    """Our config for a Hugging Face config.json of any family (`model_type`)."""
    family = raw.get("model_type", "bert")
    if family not in ARCHITECTURES:
        raise BertJaxError(
            f"{source}: model_type {family!r} is not a BERT-family model "
            f"({', '.join(ARCHITECTURES)})"
        )
    for arch in raw.get("architectures") or []:
        prefix, name = _NAMES[family]
        if not arch.startswith(prefix):
            raise BertJaxError(f"{source}: architecture {arch!r} is not a {name} model")
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise BertJaxError(f"{source}: only absolute position embeddings are supported")
    raw = {**_HF_DEFAULTS.get(family, {}), **raw}
    if family == "distilbert":
        if raw.get("sinusoidal_pos_embds"):
            raise BertJaxError(f"{source}: sinusoidal position embeddings are not supported")
        known = {ours: raw[theirs] for theirs, ours in _DISTILBERT.items() if theirs in raw}
        known.update(type_vocab_size=0, pooler=False, layer_norm_eps=1e-12)
    else:
        known = {k: raw[k] for k in _COMMON if k in raw}
    if "vocab_size" not in known:
        raise BertJaxError(f"{source}: has no vocab_size")
    if family == "bert":  # causal: our earlier exports' field; is_decoder: transformers'
        known["causal"] = bool(raw.get("is_decoder", raw.get("causal", False)))
    elif family == "roberta":
        known["position_offset"] = int(raw["pad_token_id"]) + 1
    elif family == "albert":
        groups = (raw.get("num_hidden_groups", 1), raw.get("inner_group_num", 1))
        if groups != (1, 1):
            raise BertJaxError(
                f"{source}: ALBERT with num_hidden_groups, inner_group_num = "
                f"{groups}; only 1, 1 (every layer shared) is supported"
            )
        known.update(embedding_size=raw["embedding_size"], share_layers="all")
    elif family == "electra":
        hidden = known.get("hidden_size", BertConfig.hidden_size)
        factorised = raw["embedding_size"] != hidden  # transformers projects only when E != H
        known.update(embedding_size=raw["embedding_size"] if factorised else None, pooler=False)
    if raw.get("is_decoder") and family != "bert":
        raise BertJaxError(f"{source}: a {family} decoder; causal attention is supported for bert")
    try:
        return BertConfig(**known, family=family, **runtime)
    except TypeError as e:
        raise BertJaxError(f"{source}: {e}") from None


def _check_exportable(config: BertConfig) -> None:
    """transformers' class for `config.family` can hold exactly this architecture."""
    family, c = config.family, config
    if family not in ARCHITECTURES:
        raise BertJaxError(f"export_hf: family {family!r} has no transformers classes")
    wanted = {
        "bert": dict(embedding_size=None, share_layers="none", position_offset=0),
        "roberta": dict(embedding_size=None, share_layers="none", causal=False),
        "albert": dict(share_layers="all", position_offset=0, pooler=True, causal=False),
        "electra": dict(share_layers="none", position_offset=0, pooler=False, causal=False),
        "distilbert": dict(
            embedding_size=None,
            share_layers="none",
            position_offset=0,
            type_vocab_size=0,
            pooler=False,
            causal=False,
            layer_norm_eps=1e-12,
        ),
    }[family]
    problems = [
        f"{k}={getattr(c, k)!r} (needs {v!r})" for k, v in wanted.items() if getattr(c, k) != v
    ]
    if family != "distilbert" and not c.type_vocab_size:
        problems.append("type_vocab_size=0 (needs >= 1)")
    if family == "roberta" and not c.position_offset:
        problems.append("position_offset=0 (needs padding id + 1)")
    if family == "albert" and c.embedding_size is None:
        problems.append("embedding_size=None (needs a width)")
    if family == "electra" and c.embedding_size == c.hidden_size:
        problems.append("embedding_size == hidden_size with a projection (transformers has none)")
    if problems:
        raise BertJaxError(
            f"export_hf: transformers' {family} models cannot hold this config: "
            + ", ".join(problems)
        )


def architecture(config: BertConfig, groups: tuple[str, ...]) -> tuple[str, frozenset[str]]:
    """(transformers class, head groups it holds) for weights with `groups`."""
    _check_exportable(config)
    present = set(groups) - {"encoder"}
    for arch, holds, needs in ARCHITECTURES[config.family]:
        if needs <= present:
            extra = present - holds
            if extra:
                raise BertJaxError(
                    f"export_hf: transformers' {arch} has no place for the "
                    f"{', '.join(sorted(extra))} head(s)"
                )
            if arch == "BertForMaskedLM" and config.causal:
                arch = "BertLMHeadModel"  # transformers' left-to-right LM (is_decoder)
            return arch, holds
    raise AssertionError("the base model needs no heads")


def hf_config(config: BertConfig, arch: str) -> dict[str, Any]:
    """transformers' config.json for `config` as `arch`."""
    family = config.family
    common = {k: getattr(config, k) for k in _COMMON}
    if family == "bert":
        out = config.to_hf_dict()
    elif family == "distilbert":
        out = {theirs: getattr(config, ours) for theirs, ours in _DISTILBERT.items()}
        out.update(sinusoidal_pos_embds=False, pad_token_id=0)
    else:
        out = {**common, "position_embedding_type": "absolute", "pad_token_id": 0}
        if family == "roberta":
            out.update(pad_token_id=config.position_offset - 1, bos_token_id=0, eos_token_id=2)
        elif family == "albert":
            out.update(embedding_size=config.embedding_size, num_hidden_groups=1, inner_group_num=1)
        elif family == "electra":
            out.update(embedding_size=config.embed_dim)
    return {**out, "model_type": family, "architectures": [arch], "tie_word_embeddings": True}
