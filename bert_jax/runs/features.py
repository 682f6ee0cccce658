"""What `extract-features` and `attention-map` run once their flags are checked: the checkpoint's
family (`bert_jax.arch.registry`) says whether it has features and which attention maps it draws
(`extracts_features`, `attention_maps`), and its reader here computes them: the BERT encoder
(BERT, RoBERTa, ALBERT, ELECTRA, DistilBERT), XLNet's content stream, ModernBERT (global and
sliding-window layers), T5's encoder (features; encoder, cross and decoder maps). The commands and
the tests call these, so both go through the same dispatch."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from bert_jax.arch import registry
from bert_jax.errors import BertJaxError
from bert_jax.features.attention_map import AttentionMap

# Flags a family's reader does not read (its directory holds its own config and tokenizer);
# setting one is refused rather than ignored. The BERT family's reader reads them all.
_UNREAD = {
    "xlnet": ("bert_config_file", "vocab_file"),
    "modernbert": ("bert_config_file", "vocab_file"),
    "seq2seq": ("bert_config_file", "do_lower_case"),  # T5's sentencepiece keeps case
}


def _family(init_checkpoint: str, command: str, capable) -> registry.Architecture:
    family = registry.for_checkpoint(init_checkpoint) or registry.get("bert")
    if not capable(family):
        raise BertJaxError(
            f"--init_checkpoint={init_checkpoint}: {command}: {family.refusal(command)}"
        )
    return family


def _check_unread(family: registry.Architecture, source: str, **flags) -> None:
    for name in _UNREAD.get(family.name, ()):
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
    extract = _EXTRACTORS.get(family.name, _extract_bert)
    return extract(run, do_lower_case, dtype, bert_config_file, vocab_file)


def _extract_bert(run, lower, dtype, bert_config_file, vocab_file):
    from bert_jax.features.extract import extract_to_file
    from bert_jax.features.loading import load_encoder

    config, params, tokenizer = load_encoder(run[0], bert_config_file, vocab_file, lower, dtype)
    return extract_to_file(config, params, tokenizer, *run[1:])


def _extract_xlnet(run, lower, dtype, bert_config_file, vocab_file):
    from bert_jax.arch.xlnet.features import extract_xlnet_to_file

    return extract_xlnet_to_file(*run, lower, dtype)


def _extract_modernbert(run, lower, dtype, bert_config_file, vocab_file):
    from bert_jax.arch.modernbert.features import extract_modernbert_to_file

    return extract_modernbert_to_file(*run, lower, dtype)


def _extract_t5(run, lower, dtype, bert_config_file, vocab_file):
    from bert_jax.arch.seq2seq.features import extract_t5_to_file

    return extract_t5_to_file(*run, vocab_file, dtype)


# family -> its features reader; the rest: the BERT encoder's.
_EXTRACTORS = {"xlnet": _extract_xlnet, "modernbert": _extract_modernbert, "seq2seq": _extract_t5}


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
    draw = _MAPS.get(family.name, _bert_map)
    return draw(init_checkpoint, text, text_b, layer, head, do_lower_case, bert_config_file,
                vocab_file, attention)  # fmt: skip


def check_layer_head(layer: int, head: int, n_layers: int, n_heads: int, stack: str) -> int:
    """The 0-based layer; `--layer` and `--head` are checked against the stack's sizes."""
    if not -n_layers <= layer < n_layers:
        raise BertJaxError(f"--layer={layer}: {stack} has {n_layers} layers")
    if not -1 <= head < n_heads:
        raise BertJaxError(f"--head={head}: {stack} has {n_heads} heads (or -1 = mean)")
    return layer % n_layers


def _pick(probs_HxQxK: np.ndarray, head: int) -> tuple[np.ndarray, str]:
    if head == -1:
        return probs_HxQxK.mean(0), "mean of heads"
    return probs_HxQxK[head], f"head {head}"


def _bert_map(path, text, text_b, layer, head, lower, bert_config_file, vocab_file, kind):
    from bert_jax.features.attention_map import attention_probs
    from bert_jax.features.loading import load_encoder

    config, params, tokenizer = load_encoder(path, bert_config_file, vocab_file, lower)
    n, h = config.num_hidden_layers, config.num_attention_heads
    layer = check_layer_head(layer, head, n, h, "the model")
    tokens, probs_NxHxLxL = attention_probs(config, params, tokenizer, text, text_b)
    probs, label = _pick(probs_NxHxLxL[layer], head)
    return AttentionMap(tokens, tokens, probs, layer, label)


def _xlnet_map(path, text, text_b, layer, head, lower, bert_config_file, vocab_file, kind):
    from bert_jax.arch.xlnet.features import load_xlnet, xlnet_attention

    cfg, params, tokenizer = load_xlnet(path, lower)
    layer = check_layer_head(layer, head, cfg.n_layer, cfg.n_head, "the model")
    tokens, probs_NxHxLxL = xlnet_attention(cfg, params, tokenizer, text, text_b)
    probs, label = _pick(probs_NxHxLxL[layer], head)
    return AttentionMap(tokens, tokens, probs, layer, f"{label}, content stream")


def _modernbert_map(path, text, text_b, layer, head, lower, bert_config_file, vocab_file, kind):
    from bert_jax.arch.modernbert.features import layer_kind, load_modernbert, modernbert_attention

    config, params, tokenizer = load_modernbert(path, lower)
    n, h = config.num_hidden_layers, config.num_attention_heads
    layer = check_layer_head(layer, head, n, h, "the model")
    tokens, probs_NxHxLxL = modernbert_attention(config, params, tokenizer, text, text_b)
    probs, label = _pick(probs_NxHxLxL[layer], head)
    return AttentionMap(tokens, tokens, probs, layer, f"{label}, {layer_kind(config, layer)}")


def _t5_map(path, text, text_b, layer, head, lower, bert_config_file, vocab_file, kind):
    from bert_jax.arch.seq2seq.features import check_attention_flags, load_t5, t5_attention

    check_attention_flags(kind, text_b)  # before the model is read
    config, params, vocab = load_t5(path, vocab_file)
    stack = "the encoder" if kind == "encoder" else "the decoder"
    n = config.num_layers if kind == "encoder" else config.num_decoder_layers
    layer = check_layer_head(layer, head, n, config.num_heads, stack)
    queries, keys, probs_NxHxQxK = t5_attention(config, params, vocab, text, text_b, kind)
    probs, label = _pick(probs_NxHxQxK[layer], head)
    return AttentionMap(queries, keys, probs, layer, f"{label}, {kind} attention")


# family -> its map reader; the rest: the BERT encoder's.
_MAPS = {"xlnet": _xlnet_map, "modernbert": _modernbert_map, "seq2seq": _t5_map}
