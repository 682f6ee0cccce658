"""The objectives registry: one module per pretraining objective, one line here per module.

    from bert_jax import objectives
    obj = objectives.get("mlm_sop")          # or its create-pretraining-data name, "sop"
    obj.shard_schema(128, 20, static_masks=True), obj.masking, obj.heads, obj.loss

The data pipeline, the input pipeline, the pretraining task (and through it the trainer, AOT
compile and experiment configs) read an objective from here; adding one is a new module beside
these plus a line in `_BUILT`. `PLANNED` names the objectives the model family will add next,
so that asking for one gives a clear error instead of a missing key. `SEQ2SEQ` holds the
encoder-decoder objectives (span_corruption, prefix_lm: `base.Seq2SeqObjective`).
"""

from __future__ import annotations

from bert_jax.errors import BertJaxError
from bert_jax.objectives import (
    doc_sentences,
    electra,
    full_sentences,
    ltr,
    mlm,
    mlm_nsp,
    mlm_sop,
    modernbert,
    permutation_lm,
    prefix_lm,
    span_corruption,
)
from bert_jax.objectives.base import Objective, Seq2SeqObjective, TokenMasking

_BUILT = (
    mlm_nsp.OBJECTIVE,
    mlm.OBJECTIVE,
    mlm_sop.OBJECTIVE,
    full_sentences.OBJECTIVE,
    doc_sentences.OBJECTIVE,
    ltr.OBJECTIVE,
    electra.OBJECTIVE,
    permutation_lm.OBJECTIVE,
    modernbert.OBJECTIVE,
)
REGISTRY: dict[str, Objective] = {}
_BY_DATA_FLAG: dict[str, Objective | Seq2SeqObjective] = {}
PLANNED: dict[str, str] = {}


def register(objective: Objective) -> None:
    """What a line in `_BUILT` does, at run time: for an objective that lives outside the package
    (tests/toy_arch/ has one). `unregister` takes it out again."""
    if objective.name in REGISTRY or objective.data_flag in _BY_DATA_FLAG:
        raise BertJaxError(f"objective {objective.name!r} is already registered")
    REGISTRY[objective.name] = objective
    if objective.data_flag:
        _BY_DATA_FLAG[objective.data_flag] = objective


for _objective in _BUILT:
    register(_objective)

# Encoder-decoder objectives (T5): shards of `inputs`/`targets`, trained by
# bert_jax.arch.seq2seq.train_task; `get` finds them too, `names` lists only the encoder
# ones above.
SEQ2SEQ: dict[str, Seq2SeqObjective] = {
    o.name: o for o in (span_corruption.OBJECTIVE, prefix_lm.OBJECTIVE)
}
_BY_DATA_FLAG |= {o.data_flag: o for o in SEQ2SEQ.values() if o.data_flag}


def unregister(name: str) -> None:
    objective = REGISTRY.pop(name)
    _BY_DATA_FLAG.pop(objective.data_flag, None)


def names() -> list[str]:
    return list(REGISTRY)


def seq2seq_names() -> list[str]:
    return list(SEQ2SEQ)


def is_seq2seq(name: str) -> bool:
    """True for an encoder-decoder objective (by registry or create-pretraining-data name)."""
    return isinstance(REGISTRY.get(name) or _BY_DATA_FLAG.get(name), Seq2SeqObjective)


def data_flags() -> list[str]:
    """The create-pretraining-data --objective values (google-research/bert-style names)."""
    return list(_BY_DATA_FLAG)


def get(name: str) -> Objective | Seq2SeqObjective:
    """An objective by registry name (`mlm_nsp`) or create-pretraining-data name (`nsp`)."""
    found = REGISTRY.get(name) or SEQ2SEQ.get(name) or _BY_DATA_FLAG.get(name)
    if found is not None:
        return found
    if name in PLANNED:
        raise BertJaxError(f"objective {name!r} ({PLANNED[name]}) is planned but not built yet")
    known = sorted({*REGISTRY, *SEQ2SEQ, *_BY_DATA_FLAG})
    raise BertJaxError(f"objective {name!r}: use one of {', '.join(known)}")


def check_pack_sequences(name: str, pack_sequences: int, flag: str = "pack_sequences") -> int:
    """`pack_sequences` >= 1, and > 1 only for an objective whose model reads packed rows (the
    data pipeline's --pack_sequences, a reader's and a pretraining task's, one rule)."""
    if pack_sequences < 1:
        raise BertJaxError(f"{flag}={pack_sequences}: must be >= 1")
    spec = get(name)
    if pack_sequences > 1 and not getattr(spec, "packable", False):
        packable = ", ".join(n for n in names() if REGISTRY[n].packable)
        raise BertJaxError(
            f"{flag}={pack_sequences}: objective {spec.name} does not train on packed rows "
            f"(packable: {packable})"
        )
    return pack_sequences


__all__ = [
    "PLANNED", "REGISTRY", "SEQ2SEQ", "Objective", "Seq2SeqObjective", "TokenMasking",
    "check_pack_sequences", "data_flags", "get", "is_seq2seq", "names", "register",
    "seq2seq_names", "unregister",
]  # fmt: skip
