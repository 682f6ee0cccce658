"""Google's TF checkpoints of the other families: ALBERT (google-research/albert) and ELECTRA
(google-research/electra), read through the BERT reader with their variable names.

Our weight table (`names.weights`) names every weight with the reference BERT's TF name; these
are the renames into each family's release (each variant's `tf_renames` in
`bert_jax.arch.bert.variants`):

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

from etils import epath

from bert_jax.arch.bert.variants import get_variant, tf_release_variant
from bert_jax.atomic_write import read_json
from bert_jax.config import BertConfig


def detect_family(variable_names: Iterable[str]) -> str:
    return tf_release_variant(list(variable_names)).name


def tf_name(canonical: str, family: str) -> str:
    """The family's TF variable name for a weight named as the reference BERT names it."""
    for pattern, replacement in get_variant(family).tf_renames:
        canonical = re.sub(pattern, replacement, canonical)
    return canonical


def config_file_in(directory: epath.Path, family: str) -> epath.Path:
    """The release's own config file name (albert_config.json) when present, else BERT's."""
    own = directory / get_variant(family).tf_config_file
    return own if own.exists() else directory / "bert_config.json"


def read_tf_config(config_file: epath.Path, family: str) -> BertConfig:
    """Our config for a release's JSON (bert_config.json / albert_config.json)."""
    raw = read_json(config_file, f"{config_file}: no such config file (a TF checkpoint of "
                                 f"{family}; give bert_config_file)")  # fmt: skip
    return config_from_tf_json(raw, family, str(config_file))


def config_from_tf_json(raw: dict[str, Any], family: str, source: str) -> BertConfig:
    from bert_jax.arch.bert.hf_configs import config_from_hf

    as_hf = get_variant(family).tf_json_as_hf(raw, source)
    if as_hf is None:  # the reference's own bert_config.json
        return BertConfig.from_dict(raw, source=source)
    return config_from_hf({**as_hf, "model_type": family}, source)
