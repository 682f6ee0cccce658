"""Google's TF checkpoints of the other families: ALBERT (google-research/albert) and ELECTRA
(google-research/electra), read through the BERT reader with their variable names.

Our weight table (`names.weights`) names every weight with the reference BERT's TF name; these
are the renames into each family's release:

- ALBERT: every layer shared (`num_hidden_groups = inner_group_num = 1`, as every released
  model) lives under `bert/encoder/transformer/group_0/inner_group_0/` with `attention_1/`,
  `ffn_1/intermediate/{dense,output/dense}`, and the two LayerNorms as `LayerNorm` (after
  attention) and `LayerNorm_1` (after the FFN). Its `gelu` is the tanh approximation.
- ELECTRA (discriminator): BERT's names under `electra/`, the E -> H projection as
  `electra/embeddings_project`, no pooler, the replaced-token head `discriminator_predictions/
  dense` and `dense_1`; its `gelu` is exact (erf). The generator (`generator/...`,
  `generator_predictions/...`) is listed as ignored. ELECTRA's releases have no config file:
  give `bert_config_file` (a BERT-style JSON with `embedding_size` when E != H).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError

_SHARED = "^bert/encoder/shared/"
_ALBERT = "bert/encoder/transformer/group_0/inner_group_0/"
_RENAMES: dict[str, tuple[tuple[str, str], ...]] = {
    "bert": (),
    "albert": (
        (_SHARED + "attention/self/", _ALBERT + "attention_1/self/"),
        (_SHARED + "attention/output/dense/", _ALBERT + "attention_1/output/dense/"),
        (_SHARED + "attention/output/LayerNorm/", _ALBERT + "LayerNorm/"),
        (_SHARED + "intermediate/dense/", _ALBERT + "ffn_1/intermediate/dense/"),
        (_SHARED + "output/dense/", _ALBERT + "ffn_1/intermediate/output/dense/"),
        (_SHARED + "output/LayerNorm/", _ALBERT + "LayerNorm_1/"),
    ),
    "electra": (
        (r"^bert/encoder/embedding_hidden_mapping_in/", "electra/embeddings_project/"),
        (r"^bert/", "electra/"),
        (r"^discriminator_predictions/dense_prediction/", "discriminator_predictions/dense_1/"),
    ),
}  # fmt: skip


def detect_family(variable_names: Iterable[str]) -> str:
    names = list(variable_names)
    if any(n.startswith("electra/") for n in names):
        return "electra"
    if any(n.startswith("bert/encoder/transformer/") for n in names):
        return "albert"
    return "bert"


def tf_name(canonical: str, family: str) -> str:
    """The family's TF variable name for a weight named as the reference BERT names it."""
    for pattern, replacement in _RENAMES[family]:
        canonical = re.sub(pattern, replacement, canonical)
    return canonical


def config_from_tf_json(raw: dict[str, Any], family: str, source: str) -> BertConfig:
    """Our config for a release's JSON (bert_config.json / albert_config.json)."""
    from bert_jax.interop.hf_configs import config_from_hf

    if family == "bert":
        return BertConfig.from_dict(raw, source=source)
    raw = dict(raw)
    if family == "albert":
        if raw.get("hidden_act", "gelu") == "gelu":
            raw["hidden_act"] = "gelu_new"  # ALBERT's modeling.gelu is the tanh form
        if raw.get("down_scale_factor", 1) != 1:
            raise BertJaxError(f"{source}: down_scale_factor != 1 is not supported")
    if family == "electra":
        raw.setdefault("embedding_size", raw.get("hidden_size", BertConfig.hidden_size))
    return config_from_hf({**raw, "model_type": family}, source)
