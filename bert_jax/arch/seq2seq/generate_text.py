"""Text in, text out: tokenise lines with the T5 vocabulary, decode them in fixed-shape batches
(inputs padded to a multiple of 16 tokens, the last batch padded with empty rows, so a file
compiles a handful of shapes), detokenise."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from bert_jax.arch.seq2seq import EncoderDecoder
from bert_jax.arch.seq2seq.decoding import GenerateSettings, Seq2SeqGenerator, trim
from bert_jax.tokenization.t5_vocab import T5Vocab


def pad_batch(rows: list[list[int]], batch_size: int, multiple: int = 16):
    """(ids BxS, mask BxS) with S the longest row rounded up to `multiple`."""
    length = max(1, max(len(r) for r in rows))
    length = -(-length // multiple) * multiple
    ids = np.zeros((batch_size, length), np.int32)
    mask = np.zeros((batch_size, length), np.int32)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    mask[len(rows) :, 0] = 1  # empty filler rows attend to one pad token (no all-masked rows)
    return ids, mask


def generate_lines(
    pretrained: Any,
    vocab: T5Vocab,
    lines: list[str],
    settings: GenerateSettings,
    batch_size: int,
    max_input_length: int,
    seed: int = 0,
) -> Iterator[dict]:
    gen = Seq2SeqGenerator(EncoderDecoder(pretrained.config), settings)
    eos = pretrained.config.eos_token_id
    for start in range(0, len(lines), batch_size):
        chunk = lines[start : start + batch_size]
        rows = []
        for line in chunk:
            ids = vocab.encode(line)
            rows.append(ids[: max_input_length - 1] + [eos] if len(ids) > max_input_length
                        else ids)  # fmt: skip
        ids_BxS, mask_BxS = pad_batch(rows, batch_size)
        out_BxM = np.asarray(gen(pretrained.params, ids_BxS, mask_BxS, seed=seed + start))
        for line, tokens in zip(chunk, out_BxM, strict=False):
            output_ids = trim(tokens, eos)
            yield {"input": line, "output": vocab.decode(output_ids), "output_ids": output_ids}
