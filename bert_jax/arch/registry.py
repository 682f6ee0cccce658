"""One module per architecture behind one protocol (`base.Architecture`), and the registry that
finds the right one. Nothing outside this package (and the model and config layers) branches on
a model family: code asks the registry, then asks the family.

(`bert_jax.arch.bert.variants` is a different, lower thing: the BERT encoder's variants, i.e. the
values of a pretraining config's `family` key, all of them this package's "bert" architecture
except ELECTRA's discriminator.)

    from bert_jax import families
    arch = families.for_objective("electra")          # an objective names its family
    arch = families.for_checkpoint(init_checkpoint)   # a workdir, HF dir or TF checkpoint
    arch = families.for_model_config(config)          # BertConfig, XLNetConfig, Seq2SeqConfig
    model = arch.classifier(config, num_labels=2)

Families: bert (BERT, RoBERTa, ALBERT, DistilBERT, causal BERT: presets of one encoder),
electra, xlnet, seq2seq (T5, Transformer, RNN), modernbert. Adding one is a module here plus a
line in `_BUILT`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from etils import epath

from bert_jax import objectives
from bert_jax.arch.base import Architecture
from bert_jax.arch.bert.family import BertFamily
from bert_jax.arch.bert.variants import VARIANTS, get_variant
from bert_jax.arch.electra.family import ElectraFamily
from bert_jax.arch.modernbert.family import ModernBertFamily
from bert_jax.arch.seq2seq.family import Seq2SeqFamily
from bert_jax.arch.xlnet.family import XLNetFamily
from bert_jax.errors import BertJaxError

_BUILT: tuple[Architecture, ...] = (
    BertFamily(), ElectraFamily(), XLNetFamily(), Seq2SeqFamily(), ModernBertFamily()
)
ARCHITECTURES: dict[str, Architecture] = {}
_BY_HF_TYPE: dict[str, Architecture] = {}
# Model config classes other than BertConfig (every BERT variant's, ELECTRA's included).
_BY_CONFIG_TYPE: dict[type, Architecture] = {}


def register(arch: Architecture) -> None:
    """What a line in `_BUILT` does, at run time: for an architecture that lives outside the
    package (tests/toy_arch/ is one). `unregister` takes it out again."""
    if arch.name in ARCHITECTURES:
        raise BertJaxError(f"architecture {arch.name!r} is already registered")
    ARCHITECTURES[arch.name] = arch
    _BY_HF_TYPE.update({t: arch for t in arch.hf_model_types})
    _BY_CONFIG_TYPE.update({t: arch for t in arch.config_types})


for _arch in _BUILT:
    register(_arch)


def unregister(name: str) -> None:
    arch = ARCHITECTURES.pop(name)
    for table in (_BY_HF_TYPE, _BY_CONFIG_TYPE):
        for key in [k for k, v in table.items() if v is arch]:
            del table[key]


def names() -> list[str]:
    return list(ARCHITECTURES)


def get(name: str) -> Architecture:
    if name not in ARCHITECTURES:
        raise BertJaxError(f"unknown architecture {name!r}; known: {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[name]


def for_objective(objective: str) -> Architecture:
    """The family an objective (registry or create-pretraining-data name) trains."""
    return get(objectives.get(objective).architecture)


def for_model_config(config: Any) -> Architecture:
    """The family whose models take `config` (a BertConfig of any preset is the BERT family's
    for fine-tuning: ELECTRA's discriminator fine-tunes as a BERT encoder)."""
    return _BY_CONFIG_TYPE.get(type(config), ARCHITECTURES["bert"])


def for_checkpoint(path: str | os.PathLike) -> Architecture | None:
    """The family of a checkpoint directory from its config.json: a Hugging Face `model_type`,
    or the model entry of a bert-jax workdir's config. None when there is no readable
    config.json or it names no family (a TF checkpoint prefix: the BERT loader's to read)."""
    config = epath.Path(path) / "config.json"
    try:
        raw = json.loads(config.read_text()) if config.exists() else {}
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):  # every reader after this one would fail less clearly
        raise BertJaxError(
            f"{config}: expected a JSON object {{...}}, found a {type(raw).__name__}"
        )
    model_type = raw.get("model_type")
    if model_type in VARIANTS:  # bert, roberta, albert, distilbert, electra
        return get(VARIANTS[model_type].architecture)
    if model_type in _BY_HF_TYPE:
        return _BY_HF_TYPE[model_type]
    # A workdir: the entry its run wrote ("xlnet" for a run fine-tuned from an XLNet directory).
    return next((f for f in ARCHITECTURES.values() for e in f.workdir_entries if e in raw), None)


def check_preset(preset: str, objective: str) -> None:
    """An encoder preset and an objective train the same family (ELECTRA's discriminator comes
    only with the electra objective, and the electra objective only with it)."""
    wanted = for_objective(objective)
    if get_variant(preset).architecture != wanted.variant_architecture:
        fits = [v.name for v in VARIANTS.values() if v.architecture == wanted.variant_architecture]
        raise BertJaxError(
            f"config.family={preset} with config.objective={objective}: family and objective "
            f"go together ({objective} trains {wanted.title}: config.family="
            f"{' | '.join(fits)})"
        )


__all__ = [
    "ARCHITECTURES", "Architecture", "check_preset", "for_checkpoint", "for_model_config",
    "for_objective", "get", "names", "register", "unregister",
]  # fmt: skip
