"""Attention probabilities of one layer and head for a sentence (or pair), drawn as a heatmap."""

from __future__ import annotations

import os
from typing import NamedTuple

import jax
import numpy as np

from bert_jax.arch.bert.model import BertModel
from bert_jax.atomic_write import open_atomic
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.tokenization.layout import layout_of


class AttentionMap(NamedTuple):
    """One layer's map: rows are `query_tokens`, columns `key_tokens` (the same tokens but for
    an encoder-decoder's cross-attention), each row sums to 1."""

    query_tokens: list[str]
    key_tokens: list[str]
    probs_QxK: np.ndarray
    layer: int  # 0-based, counted in the stack the map is of
    label: str  # the head (or "mean of heads") and, where layers differ, the layer's kind


def layout_tokens(tokenizer, text_a: str, text_b: str | None) -> tuple[list[str], list[int]]:
    """(tokens, segment ids) of a sentence or pair in the tokenizer's layout: [CLS] a [SEP]
    (b [SEP]); RoBERTa <s> a </s> (</s> b </s>); ModernBERT as BERT without token types."""
    layout = layout_of(tokenizer)
    tokens = [layout.cls, *tokenizer.tokenize(text_a)]
    if text_b:
        tokens += layout.pair_sep
        segments = [0] * len(tokens)
        tokens_b = [*tokenizer.tokenize(text_b), layout.sep]
        tokens += tokens_b
        segments += [layout.segment_b] * len(tokens_b)
    else:
        tokens.append(layout.sep)
        segments = [0] * len(tokens)
    return tokens, segments


def attention_probs(
    config: BertConfig, params: dict, tokenizer, text_a: str, text_b: str | None = None
) -> tuple[list[str], np.ndarray]:
    """(tokens, N x H x L x L float32): every layer's softmax probabilities, rows = queries."""
    params = params.get("bert", params)
    tokens, segments = layout_tokens(tokenizer, text_a, text_b)
    if len(tokens) > config.max_position_embeddings:
        raise BertJaxError(
            f"{len(tokens)} tokens > max_position_embeddings {config.max_position_embeddings}"
        )
    ids_1xL = np.asarray([tokenizer.convert_tokens_to_ids(tokens)], np.int32)
    model = BertModel(config, add_pooling_layer=False)

    @jax.jit  # one program: op-by-op dispatch compiles every op of the model on its own
    def run(p, ids, seg):
        return model.apply({"params": p}, ids, None, seg, output_attentions=True).attentions

    attentions = run(params, ids_1xL, np.asarray([segments], np.int32))
    return tokens, np.stack([np.asarray(p[0], np.float32) for p in attentions])


def plot_attention(
    tokens: list[str],
    probs_QxK: np.ndarray,
    output_file: str | os.PathLike,
    title: str = "",
    key_tokens: list[str] | None = None,
) -> None:
    """Write a PNG heatmap (queries down, keys across: `key_tokens`, else `tokens`),
    atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = tokens if key_tokens is None else key_tokens
    width, height = (max(4.0, 0.32 * len(t) + 1.5) for t in (keys, tokens))
    fig, ax = plt.subplots(figsize=(width + 1.0, height))
    image = ax.imshow(probs_QxK, cmap="viridis", vmin=0.0, vmax=float(probs_QxK.max()))
    ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=8)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=8)
    ax.set_xlabel("attended-to token (key)")
    ax.set_ylabel("token (query)")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    try:
        with open_atomic(output_file, binary=True) as f:
            fig.savefig(f, format="png", dpi=120)
    finally:
        plt.close(fig)


def check_layer_head(layer: int, head: int, n_layers: int, n_heads: int, stack: str) -> int:
    """The 0-based layer; `--layer` and `--head` are checked against the stack's sizes."""
    if not -n_layers <= layer < n_layers:
        raise BertJaxError(f"--layer={layer}: {stack} has {n_layers} layers")
    if not -1 <= head < n_heads:
        raise BertJaxError(f"--head={head}: {stack} has {n_heads} heads (or -1 = mean)")
    return layer % n_layers


def pick_head(probs_HxQxK: np.ndarray, head: int) -> tuple[np.ndarray, str]:
    """One head's map, or (head -1) the mean of the layer's heads; and its label."""
    if head == -1:
        return probs_HxQxK.mean(0), "mean of heads"
    return probs_HxQxK[head], f"head {head}"
