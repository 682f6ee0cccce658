"""What `extract-features` and `attention-map` run once their flags are checked: the checkpoint's
architecture (`bert_jax.arch.registry`) says whether it has features and which attention maps it
draws (`extracts_features`, `attention_maps`), and its reader (`features_reader`: a module with
`extract`, `attention_map` and `UNREAD`, the flags it does not read) computes them: the BERT
encoder's, XLNet's content stream, ModernBERT's global and sliding-window layers, T5's encoder
(features; encoder, cross and decoder maps). The commands and the tests call these, so both go
through the same dispatch."""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from types import ModuleType

from bert_jax.arch import registry
from bert_jax.errors import BertJaxError
from bert_jax.features.attention_map import AttentionMap


def _family(init_checkpoint: str, command: str, capable) -> registry.Architecture:
    family = registry.for_checkpoint(init_checkpoint) or registry.get("bert")
    if not capable(family):
        raise BertJaxError(
            f"--init_checkpoint={init_checkpoint}: {command}: {family.refusal(command)}"
        )
    return family


def _reader(family: registry.Architecture) -> ModuleType:
    """The architecture's features reader (its `features.py`), imported only when asked for."""
    return importlib.import_module(family.features_reader)


def _check_unread(family: registry.Architecture, source: str, **flags) -> None:
    for name in _reader(family).UNREAD:
        if flags.get(name) is not None:
            raise BertJaxError(
                f"--{name}: not read for {family.title} ({source} holds its own files); "
                "drop the flag"
            )


def extract_features(
    init_checkpoint: str,
    input_file: str | os.PathLike,
    output_file: str | os.PathLike,
    layer_indexes: Sequence[int],
    max_seq_length: int,
    batch_size: int,
    do_lower_case: bool | None = None,
    dtype: str = "float32",
    bert_config_file: str | None = None,
    vocab_file: str | None = None,
) -> int:
    """Write the reference's JSON lines for `input_file`; the number of examples."""
    from bert_jax.features.extract import check_seq_length

    check_seq_length(max_seq_length, 0, [])  # before the model is read
    family = _family(init_checkpoint, "extract-features", lambda f: f.extracts_features)
    _check_unread(family, init_checkpoint, bert_config_file=bert_config_file,
                  vocab_file=vocab_file, do_lower_case=do_lower_case)  # fmt: skip
    run = (init_checkpoint, input_file, output_file, layer_indexes, max_seq_length, batch_size)
    return _reader(family).extract(run, do_lower_case, dtype, bert_config_file, vocab_file)


def attention_map(
    init_checkpoint: str,
    text: str,
    text_b: str | None,
    layer: int,
    head: int,
    do_lower_case: bool | None = None,
    bert_config_file: str | None = None,
    vocab_file: str | None = None,
    attention: str = "encoder",
) -> AttentionMap:
    """One layer's head (-1: the mean of its heads) of the `attention` map: "encoder" (the
    encoder's self-attention, every family), "cross" or "decoder" (an encoder-decoder's decoder
    over `text_b`, the target text)."""
    family = _family(init_checkpoint, "attention-map", lambda f: bool(f.attention_maps))
    if attention not in family.attention_maps:
        raise BertJaxError(
            f"--attention={attention}: {init_checkpoint} is {family.title}, whose maps are "
            f"--attention={' | '.join(family.attention_maps)}"
        )
    _check_unread(family, init_checkpoint, bert_config_file=bert_config_file,
                  vocab_file=vocab_file, do_lower_case=do_lower_case)  # fmt: skip
    return _reader(family).attention_map(init_checkpoint, text, text_b, layer, head,
                                         do_lower_case, bert_config_file, vocab_file,
                                         attention)  # fmt: skip
