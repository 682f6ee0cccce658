"""Contextual token features as google-research/bert's extract_features.py computes and writes them.

Input: one example per line, `text_a` or `text_a ||| text_b`. Output: one JSON object per line,
`{"linex_index": i, "features": [{"token": t, "layers": [{"index": l, "values": [...]}]}]}`
for every token including [CLS] and [SEP]; layer index -1 is the last Transformer layer (the
embeddings output is not a layer, as in the reference) and values are rounded to 6 decimals.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.arch.bert.model import BertModel
from bert_jax.atomic_write import open_atomic
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.tokenization.layout import layout_of

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass(frozen=True)
class Example:
    unique_id: int
    text_a: str
    text_b: str | None = None


@dataclasses.dataclass(frozen=True)
class Features:
    unique_id: int
    tokens: list[str]
    input_ids: np.ndarray
    input_mask: np.ndarray
    segment_ids: np.ndarray


def read_examples(input_file: str | os.PathLike) -> list[Example]:
    try:
        with open(input_file, encoding="utf-8", errors="ignore") as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise BertJaxError(f"{input_file}: cannot read ({e.strerror})") from None
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start an empty one
    examples = []
    for i, line in enumerate(lines):
        m = _PAIR.match(line.strip())
        text_a, text_b = (m.group(1), m.group(2)) if m else (line.strip(), None)
        examples.append(Example(i, text_a, text_b))
    return examples


def check_seq_length(seq_length: int, pair_overhead: int, examples: Sequence[Example]) -> None:
    """Room for the special tokens and one text token, and for a pair's special tokens."""
    if seq_length < 3:
        raise BertJaxError(
            f"--max_seq_length={seq_length}: must be >= 3 (two special tokens and one token)"
        )
    if seq_length < pair_overhead and any(ex.text_b is not None for ex in examples):
        raise BertJaxError(
            f"--max_seq_length={seq_length}: the input has `a ||| b` pairs, which need >= "
            f"{pair_overhead} (their special tokens)"
        )


def _truncate_pair(a: list[str], b: list[str], max_length: int) -> None:
    while len(a) + len(b) > max_length:
        (a if len(a) > len(b) else b).pop()


def featurize(examples: Sequence[Example], seq_length: int, tokenizer) -> list[Features]:
    """[CLS] a [SEP] (b [SEP]), truncating the longer side first, padded to seq_length (the
    tokenizer's layout: RoBERTa's <s> a </s> (</s> b </s>), padded with <pad>)."""
    layout = layout_of(tokenizer)
    check_seq_length(seq_length, layout.pair_overhead(), examples)
    out = []
    for ex in examples:
        tokens_a = tokenizer.tokenize(ex.text_a)
        tokens_b = tokenizer.tokenize(ex.text_b) if ex.text_b is not None else None
        if tokens_b is not None:
            _truncate_pair(tokens_a, tokens_b, seq_length - layout.pair_overhead())
            tokens = [layout.cls, *tokens_a, *layout.pair_sep]
            segments = [0] * len(tokens)
            tokens += [*tokens_b, layout.sep]
            segments += [layout.segment_b] * (len(tokens_b) + 1)
        else:
            tokens = [layout.cls, *tokens_a[: seq_length - 2], layout.sep]
            segments = [0] * len(tokens)
        ids = np.full(seq_length, layout.pad_id(tokenizer.vocab), np.int32)
        ids[: len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
        mask = np.zeros(seq_length, np.int32)
        mask[: len(tokens)] = 1
        seg = np.zeros(seq_length, np.int32)
        seg[: len(tokens)] = segments
        out.append(Features(ex.unique_id, tokens, ids, mask, seg))
    return out


def layer_outputs(
    config: BertConfig,
    bert_params: dict,
    features: Sequence[Features],
    layer_indexes: Sequence[int],
    batch_size: int = 32,
) -> Iterator[tuple[Features, np.ndarray]]:
    """Yields (features, K x L x D float32) for the requested Transformer layers."""
    check_layer_indexes(layer_indexes, config.num_hidden_layers)
    model = BertModel(config, add_pooling_layer=False)

    @jax.jit
    def run(params, ids, mask, seg):
        out = model.apply({"params": params}, ids, mask, seg, output_hidden_states=True)
        layers = out.hidden_states[1:]  # drop the embeddings: index -1 is the last layer
        return jnp.stack([layers[i].astype(jnp.float32) for i in layer_indexes], axis=1)

    yield from run_batches(run, bert_params, features, batch_size)


def check_layer_indexes(layer_indexes: Sequence[int], n: int) -> None:
    for index in layer_indexes:
        if not -n <= index < n:
            raise BertJaxError(f"--layers: {index} is out of range for a {n}-layer model")


def run_batches(
    run, params, features: Sequence[Features], batch_size: int
) -> Iterator[tuple[Features, np.ndarray]]:
    """Yields (features, what `run(params, ids, mask, segments)` gives for its row), batch by
    batch; a short last batch is padded with copies so that one compiled shape serves all."""
    params = jax.device_put(params)  # once, not with every batch
    for start in range(0, len(features), batch_size):
        chunk = features[start : start + batch_size]
        pad = batch_size - len(chunk) if len(features) > batch_size else 0
        rows = [*chunk, *[chunk[-1]] * pad]
        ids, mask, seg = (np.stack([getattr(f, k) for f in rows]) for k in
                          ("input_ids", "input_mask", "segment_ids"))  # fmt: skip
        values_Bx = np.asarray(run(params, ids, mask, seg))
        yield from zip(chunk, values_Bx, strict=False)


def write_features(
    output_file: str | os.PathLike,
    rows: Iterator[tuple[Features, np.ndarray]],
    layer_indexes: Sequence[int],
) -> int:
    """The JSON lines of `rows` (features, K x L x D), atomically; the number written."""
    n = 0
    with open_atomic(output_file) as f:
        for feat, values_KxLxD in rows:
            f.write(to_json(feat, values_KxLxD, layer_indexes) + "\n")
            n += 1
    return n


def to_json(features: Features, values_KxLxD: np.ndarray, layer_indexes: Sequence[int]) -> str:
    values = values_KxLxD.astype(np.float32).tolist()  # exact float32 -> Python float, as float(x)
    tokens = []
    for i, token in enumerate(features.tokens):
        layers = [
            {"index": index, "values": [round(x, 6) for x in values[k][i]]}
            for k, index in enumerate(layer_indexes)
        ]
        tokens.append({"token": token, "layers": layers})
    return json.dumps({"linex_index": features.unique_id, "features": tokens})


def extract_to_file(
    config: BertConfig,
    bert_params: dict,
    tokenizer,
    input_file: str | os.PathLike,
    output_file: str | os.PathLike,
    layer_indexes: Sequence[int] = (-1, -2, -3, -4),
    max_seq_length: int = 128,
    batch_size: int = 32,
) -> int:
    """Writes the JSON lines (atomically) and returns the number of examples."""
    if max_seq_length > config.max_position_embeddings:
        raise BertJaxError(
            f"--max_seq_length {max_seq_length} > max_position_embeddings "
            f"{config.max_position_embeddings} of the model"
        )
    features = featurize(read_examples(input_file), max_seq_length, tokenizer)
    with open_atomic(output_file) as f:
        for feat, values in layer_outputs(config, bert_params, features, layer_indexes,
                                          batch_size):  # fmt: skip
            f.write(to_json(feat, values, layer_indexes) + "\n")
    return len(features)
