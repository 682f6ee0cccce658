"""The BERT family as presets of one encoder: which `BertConfig` switches each family sets and
which pretraining heads it has. The only place that knows this; sizes are overrides.

Heads: `mlm` (masked-LM, tied decoder), `nsp` (the sentence-pair head on the pooler: NSP for
BERT, SOP for ALBERT), `rtd` (ELECTRA's replaced-token detection). ELECTRA's generator is the
same family with the `mlm` head (`generator_heads`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    switches: dict[str, Any]  # BertConfig fields at the family's base size
    heads: tuple[str, ...]
    generator_heads: tuple[str, ...] = ()


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("bert", {}, ("mlm", "nsp")),
        # Liu et al. 2019: byte-level BPE vocab of 50265, positions offset past padding id 1
        # (so 514 of them for 512 tokens), one token type, LayerNorm eps 1e-5, no NSP.
        Family(
            "roberta",
            dict(
                vocab_size=50265,
                max_position_embeddings=514,
                position_offset=2,
                type_vocab_size=1,
                layer_norm_eps=1e-5,
            ),
            ("mlm",),
        ),
        # Lan et al. 2019 (ALBERT-base): E=128, every layer shared, no dropout, SOP on the
        # pooler, 30000-piece sentencepiece vocab, the tanh GELU.
        Family(
            "albert",
            dict(
                vocab_size=30000,
                embedding_size=128,
                share_layers="all",
                hidden_act="gelu_new",
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
            ),
            ("mlm", "nsp"),
        ),
        # Clark et al. 2020 (ELECTRA-base: E = H, so no projection; ELECTRA-small sets
        # hidden_size=256, embedding_size=128). No pooler.
        Family("electra", dict(pooler=False), ("rtd",), generator_heads=("mlm",)),
        # Sanh et al. 2019: BERT-base halved in depth, no token types, no pooler.
        Family("distilbert", dict(num_hidden_layers=6, type_vocab_size=0, pooler=False), ("mlm",)),
    )
}


def get_family(name: str) -> Family:
    if name not in FAMILIES:
        raise BertJaxError(f"unknown model family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]


def family_config(name: str, **overrides: Any) -> BertConfig:
    """The family's base-size config with `overrides` (sizes, dropout, runtime fields) applied."""
    family = get_family(name)
    return BertConfig(**{**family.switches, "family": name, **overrides})
