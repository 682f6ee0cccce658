"""Which kind of model a checkpoint directory holds, from its config.json: a Hugging Face
`model_type` or the model entry of a bert-jax workdir's config. The commands and the fine-tuning
runner dispatch on it (BERT family, XLNet, encoder-decoder)."""

from __future__ import annotations

import json
import os

from etils import epath

_BERT_TYPES = ("bert", "roberta", "albert", "electra", "distilbert")


def model_kind(path: str | os.PathLike) -> str | None:
    """"bert" (any BERT family), "xlnet" (a Hugging Face XLNet dir or an XLNet workdir),
    "seq2seq" (T5 dir or seq2seq workdir), or None when there is no readable config.json or it
    names none of these."""
    config = epath.Path(path) / "config.json"
    try:
        raw = json.loads(config.read_text()) if config.exists() else {}
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    model_type = raw.get("model_type")
    if model_type == "t5" or "seq2seq" in raw:
        return "seq2seq"
    if model_type == "xlnet" or "xlnet" in raw:  # an HF dir, or a workdir fine-tuned from one
        return "xlnet"
    if model_type in _BERT_TYPES or "bert" in raw:
        return "bert"
    return None
