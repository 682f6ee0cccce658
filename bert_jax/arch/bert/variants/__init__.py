"""The BERT family as variants of one encoder: which `BertConfig` switches each sets, which
pretraining heads it has, and how its releases name weights and config (one module per variant,
`base.Variant` says what one holds). The only place that knows a variant; sizes are overrides.

Heads are named in the one vocabulary of `bert_jax.objectives.base.HEADS`: `mlm` (masked LM,
tied decoder), `nsp` / `sop` (the sentence-pair head on the pooler: NSP for BERT, SOP for ALBERT;
its weights are the "nsp" checkpoint group either way), `rtd` (ELECTRA's replaced-token
detection). ELECTRA's generator is the same variant with the `mlm` head (`generator_heads`).
Adding a variant is a module here plus a line in `_BUILT` (and a recipe in bert_jax/configs/).
"""

from __future__ import annotations

from typing import Any

from bert_jax.arch.bert.variants import albert, bert, distilbert, electra, roberta
from bert_jax.arch.bert.variants.base import HfNames, Variant
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError

_BUILT = (bert.VARIANT, roberta.VARIANT, albert.VARIANT, electra.VARIANT, distilbert.VARIANT)
VARIANTS: dict[str, Variant] = {f.name: f for f in _BUILT}


def get_variant(name: str) -> Variant:
    if name not in VARIANTS:
        raise BertJaxError(f"unknown model family {name!r}; known: {', '.join(VARIANTS)}")
    return VARIANTS[name]


def variant_config(name: str, **overrides: Any) -> BertConfig:
    """The variant's base-size config with `overrides` (sizes, dropout, runtime fields) applied."""
    family = get_variant(name)
    return BertConfig(**{**family.switches, "family": name, **overrides})


def tf_release_variant(variable_names: list[str]) -> Variant:
    """The variant whose TF release has these variable names (BERT's unless one is marked)."""
    marked = [f for f in _BUILT if f.tf_marker]
    found = (f for f in marked if any(n.startswith(f.tf_marker) for n in variable_names))
    return next(found, VARIANTS["bert"])


__all__ = ["VARIANTS", "Variant", "HfNames", "variant_config", "get_variant", "tf_release_variant"]
