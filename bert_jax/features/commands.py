"""What `extract-features` and `attention-map` run once their flags are checked: the checkpoint's
family (`bert_jax.families`) says whether it has features or attention maps to give (BERT family,
XLNet's content stream; an encoder-decoder is refused by name). The commands and the tests call
these, so both go through the same dispatch."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from bert_jax import families
from bert_jax.errors import BertJaxError

_FAMILY = "the BERT family (BERT, RoBERTa, ALBERT, ELECTRA, DistilBERT)"


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
    from bert_jax.features.extract import check_seq_length, extract_to_file
    from bert_jax.features.loading import load_encoder

    check_seq_length(max_seq_length, 0, [])  # before the model is read
    family = families.for_checkpoint(init_checkpoint) or families.get("bert")
    if not family.extracts_features:
        raise BertJaxError(
            f"--init_checkpoint={init_checkpoint}: {family.title}; features are extracted from "
            f"{_FAMILY} and XLNet"
        )
    if family.padding_side == "left":  # XLNet: the content stream, in XLNet's layout
        from bert_jax.features.xlnet import extract_xlnet_to_file

        for name, value in (("bert_config_file", bert_config_file), ("vocab_file", vocab_file)):
            if value:
                raise BertJaxError(f"--{name}: not read for XLNet ({init_checkpoint})")
        return extract_xlnet_to_file(
            init_checkpoint, input_file, output_file, layer_indexes, max_seq_length,
            batch_size, do_lower_case, dtype,
        )  # fmt: skip
    config, params, tokenizer = load_encoder(
        init_checkpoint, bert_config_file, vocab_file, do_lower_case, dtype
    )
    return extract_to_file(
        config, params, tokenizer, input_file, output_file, layer_indexes, max_seq_length,
        batch_size,
    )  # fmt: skip


def attention_map(
    init_checkpoint: str,
    text: str,
    text_b: str | None,
    layer: int,
    head: int,
    do_lower_case: bool | None = None,
    bert_config_file: str | None = None,
    vocab_file: str | None = None,
) -> tuple[list[str], np.ndarray, int, str]:
    """(tokens, L x L probabilities, layer index, head label) of one layer's head (-1: mean)."""
    from bert_jax.features.attention_map import attention_probs
    from bert_jax.features.loading import load_encoder

    family = families.for_checkpoint(init_checkpoint) or families.get("bert")
    if not family.draws_attention_maps:
        raise BertJaxError(
            f"--init_checkpoint={init_checkpoint}: {family.title}; attention maps are drawn "
            f"for {_FAMILY}"
        )
    config, params, tokenizer = load_encoder(
        init_checkpoint, bert_config_file, vocab_file, do_lower_case
    )
    n_layers, n_heads = config.num_hidden_layers, config.num_attention_heads
    if not -n_layers <= layer < n_layers:
        raise BertJaxError(f"--layer={layer}: the model has {n_layers} layers")
    if not -1 <= head < n_heads:
        raise BertJaxError(f"--head={head}: the model has {n_heads} heads (or -1 = mean)")
    tokens, probs_NxHxLxL = attention_probs(config, params, tokenizer, text, text_b)
    layer = layer % n_layers
    probs_HxLxL = probs_NxHxLxL[layer]
    probs_LxL = probs_HxLxL.mean(0) if head == -1 else probs_HxLxL[head]
    label = "mean of heads" if head == -1 else f"head {head}"
    return tokens, probs_LxL, layer, label
