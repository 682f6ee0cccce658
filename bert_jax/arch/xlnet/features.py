"""`extract-features` and `attention-map` for Hugging Face XLNet directories (config.json,
model.safetensors, spiece.model): XLNet's input layout (A <sep> [B <sep>] <cls>, left-padded,
segment ids 0 / 1 and 2 for <cls>), the content stream's hidden states in the reference
JSON-lines format of `bert_jax.features.extract` (real tokens only; layer -1 = last layer), and
the content stream's attention probabilities."""

from __future__ import annotations

import os
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.arch.xlnet import XLNet
from bert_jax.arch.xlnet.checkpoints import read_xlnet_dir
from bert_jax.atomic_write import open_atomic
from bert_jax.errors import BertJaxError
from bert_jax.features.attention_map import AttentionMap, check_layer_head, pick_head
from bert_jax.features.extract import (
    Features,
    _truncate_pair,
    check_seq_length,
    read_examples,
    to_json,
)
from bert_jax.features.taps import probabilities, run_with_taps
from bert_jax.tokenization.directory import (
    check_vocab_fits,
    open_xlnet_tokenizer,
    tokenizer_file_in,
)
from bert_jax.tokenization.layout import XLNET_CLS_SEGMENT, XLNET_PAD_SEGMENT


def featurize(examples, seq_length: int, tokenizer) -> list[Features]:
    """XLNetTokenizer's layout, truncating the longer side first; left padding with <pad>."""
    check_seq_length(seq_length, 3, examples)  # A <sep> B <sep> <cls>
    out = []
    for ex in examples:
        a = tokenizer.tokenize(ex.text_a)
        b = tokenizer.tokenize(ex.text_b) if ex.text_b is not None else None
        if b is not None:
            _truncate_pair(a, b, seq_length - 3)
        else:
            a = a[: seq_length - 2]
        tokens, segments = [*a, "<sep>"], [0] * (len(a) + 1)
        if b is not None:
            tokens, segments = tokens + [*b, "<sep>"], segments + [1] * (len(b) + 1)
        tokens, segments = tokens + ["<cls>"], segments + [XLNET_CLS_SEGMENT]
        pad = seq_length - len(tokens)
        ids = np.full(seq_length, tokenizer.vocab["<pad>"], np.int32)
        ids[pad:] = tokenizer.convert_tokens_to_ids(tokens)
        mask = (np.arange(seq_length) >= pad).astype(np.int32)
        seg = np.full(seq_length, XLNET_PAD_SEGMENT, np.int32)
        seg[pad:] = segments
        out.append(Features(ex.unique_id, tokens, ids, mask, seg))
    return out


def extract_xlnet_to_file(
    model_dir: str | os.PathLike,
    input_file: str | os.PathLike,
    output_file: str | os.PathLike,
    layer_indexes: Sequence[int] = (-1, -2, -3, -4),
    max_seq_length: int = 128,
    batch_size: int = 32,
    do_lower_case: bool | None = None,
    dtype: str = "float32",
) -> int:
    """Features of an XLNet directory's content stream; `do_lower_case=None`: the tokenizer's
    own rule (spiece.model: cased)."""
    cfg, encoder, tokenizer = load_xlnet(model_dir, do_lower_case, dtype)
    n = cfg.n_layer
    for index in layer_indexes:
        if not -n <= index < n:
            raise BertJaxError(f"--layers: {index} is out of range for a {n}-layer model")
    features = featurize(read_examples(input_file), max_seq_length, tokenizer)
    model = XLNet(cfg)
    encoder = jax.device_put(encoder)

    @jax.jit
    def run(p, ids, mask, seg):
        out = model.apply({"params": p}, ids, seg, mask, output_hidden_states=True)
        layers = out.hidden_states[1:]  # index -1 is the last layer, as the BERT extractor
        return jnp.stack([layers[i].astype(jnp.float32) for i in layer_indexes], axis=1)

    with open_atomic(output_file) as f:
        for start in range(0, len(features), batch_size):
            chunk = features[start : start + batch_size]
            pad = batch_size - len(chunk) if len(features) > batch_size else 0
            rows = [*chunk, *[chunk[-1]] * pad]
            arrays = [np.stack([getattr(r, k) for r in rows])
                      for k in ("input_ids", "input_mask", "segment_ids")]  # fmt: skip
            values_BxKxLxD = np.asarray(run(encoder, *arrays))
            for feat, values_KxLxD in zip(chunk, values_BxKxLxD, strict=False):
                real = int(feat.input_mask.sum())  # left padding: the real tokens are last
                f.write(to_json(feat, values_KxLxD[:, -real:], layer_indexes) + "\n")
    return len(features)


def load_xlnet(
    model_dir: str | os.PathLike, do_lower_case: bool | None = None, dtype: str = "float32"
):
    """(config, encoder params, tokenizer) of an XLNet directory or workdir."""
    cfg, params, _ = read_xlnet_dir(model_dir, dtype=dtype)
    spiece = tokenizer_file_in(model_dir)
    if spiece is None:
        raise BertJaxError(f"{model_dir}: no spiece.model or tokenizer.json (XLNet's tokenizer)")
    tokenizer = open_xlnet_tokenizer(spiece, do_lower_case)
    check_vocab_fits(tokenizer, cfg.vocab_size, model_dir)
    return cfg, params["transformer"], tokenizer


def xlnet_attention(
    cfg, params: dict, tokenizer, text_a: str, text_b: str | None
) -> tuple[list[str], np.ndarray]:
    """(tokens, N x H x L x L float32): the content stream's probabilities in every layer, in
    XLNet's layout A <sep> (B <sep>) <cls>, rows = queries (the model's own softmax, tapped
    where it passes to dropout: `bert_jax.features.taps`)."""
    a = tokenizer.tokenize(text_a)
    tokens, segments = [*a, "<sep>"], [0] * (len(a) + 1)
    if text_b:
        b = tokenizer.tokenize(text_b)
        tokens, segments = tokens + [*b, "<sep>"], segments + [1] * (len(b) + 1)
    tokens, segments = tokens + ["<cls>"], segments + [XLNET_CLS_SEGMENT]
    ids_1xL = np.asarray([tokenizer.convert_tokens_to_ids(tokens)], np.int32)
    model = XLNet(cfg)
    paths = [(f"layer_{i}", "rel_attn", "drop") for i in range(cfg.n_layer)]

    @jax.jit
    def run(p, ids, seg):
        _, seen = run_with_taps(model, p, paths.__contains__, ids, seg)
        # The first call of each layer's dropout is the content stream's softmax (the second
        # its attention output).
        return jnp.stack([probabilities(seen, path, call=0)[0] for path in paths])

    return tokens, np.asarray(run(params, ids_1xL, np.asarray([segments], np.int32)), np.float32)


# ---- the reader `bert_jax.runs.features` calls (this family's `features_reader`) ------------
UNREAD = ("bert_config_file", "vocab_file")  # the directory holds its own


def extract(run, lower, dtype, bert_config_file, vocab_file) -> int:
    return extract_xlnet_to_file(*run, lower, dtype)


def attention_map(path, text, text_b, layer, head, lower, bert_config_file, vocab_file,
                  kind) -> AttentionMap:  # fmt: skip
    cfg, params, tokenizer = load_xlnet(path, lower)
    layer = check_layer_head(layer, head, cfg.n_layer, cfg.n_head, "the model")
    tokens, probs_NxHxLxL = xlnet_attention(cfg, params, tokenizer, text, text_b)
    probs, label = pick_head(probs_NxHxLxL[layer], head)
    return AttentionMap(tokens, tokens, probs, layer, f"{label}, content stream")
