"""create-pretraining-data for the encoder-decoder objectives (span_corruption, prefix_lm): text
-> T5 sentencepiece ids -> documents concatenated (T5 packs across documents) and cut into chunks
of the objective's raw length -> (inputs, targets) per chunk -> TFRecord shards of
`tf.train.Example` with int64 `inputs` [inputs_length] and `targets` [targets_length]
(zero-padded) + stats.json with the geometry the training run checks.

    create_seq2seq_data("embedded:", "shards/", "vocab/spiece.model",
                        objective="span_corruption", inputs_length=512, num_shards=8)

Streaming, one process: the text is read block by block (whole documents), each block's lines
are encoded in one sentencepiece call and the chunks written as they fill. Chunk j is made with
`numpy.random.default_rng((seed, j))` and goes to shard j mod num_shards, so an example depends
only on (seed, its index); the tail shorter than a chunk is dropped (counted in stats.json).
Shards appear under their final names only when all are complete (`ShardSet`); text too short
for one example per shard is refused and an earlier run's shards are kept.
"""

from __future__ import annotations

import logging
import os

import numpy as np
from etils import epath

from bert_jax import objectives
from bert_jax.atomic_write import write_text_atomic
from bert_jax.corpus import sources as text_sources
from bert_jax.data import stats as bert_stats
from bert_jax.data.shard_outputs import (
    ShardSet,
    remove_other_shard_sets,
    remove_stale_temporaries,
    shard_paths,
)
from bert_jax.errors import BertJaxError
from bert_jax.objectives.base import Seq2SeqObjective
from bert_jax.objectives.span_corruption import pad_to
from bert_jax.shards.example import encode
from bert_jax.tokenization.t5_vocab import T5Vocab

log = logging.getLogger(__name__)

_COUNTERS = ("lines", "invalid_utf8_lines", "long_lines_split", "text_bytes")


def _fits(spec: Seq2SeqObjective, inputs_length: int) -> bool:
    """Whether a full chunk's example fits (inputs_length, its targets length). The lengths of
    an example do not depend on the draw (span corruption: the noise and span counts follow
    from the chunk length; prefix LM: its longest split fills both), so a few draws decide."""
    if inputs_length < 4:
        return False
    raw_length, targets_length = spec.lengths(inputs_length)
    chunk = np.zeros(raw_length, np.int64)
    for seed in range(4):
        inputs, targets = spec.make_example(chunk, np.random.default_rng(seed), 1 << 20)
        if len(inputs) > inputs_length or len(targets) > targets_length:
            return False
    return True


def least_inputs_length(spec: Seq2SeqObjective, limit: int = 4096) -> int:
    """The shortest --max_seq_length whose examples fit (span corruption: 10, one span)."""
    return next(n for n in range(4, limit) if _fits(spec, n))


def _check(
    spec: Seq2SeqObjective, inputs_length: int, num_shards: int, max_line_chars: int,
    block_bytes: int,
) -> tuple[int, int]:  # fmt: skip
    if not _fits(spec, inputs_length):
        least = least_inputs_length(spec)
        raise BertJaxError(
            f"--max_seq_length={inputs_length}: too short for one {spec.name} example (inputs "
            f"of at least {least} tokens hold one; use --max_seq_length={least} or more)"
        )
    if num_shards < 1:
        raise BertJaxError(f"--num_shards={num_shards}: must be >= 1")
    for flag, value, least in (("block_bytes", block_bytes, 1), ("max_line_chars", max_line_chars,
                                                                 0)):  # fmt: skip
        if value < least:  # (as the BERT data path: block_bytes <= 0 never cuts a block)
            raise BertJaxError(f"--{flag}={value}: must be >= {least}")
    return spec.lengths(inputs_length)


def _check_enough(
    n: int, tail: int, raw_length: int, spec: Seq2SeqObjective, input_files: str | list[str],
    num_files: int,
) -> None:  # fmt: skip
    """Refuse, before the shards replace an earlier run's (as the BERT path refuses an empty
    corpus), text too short for one example, or for one example per output file (training
    refuses an empty shard)."""
    if n >= num_files:
        return
    named = input_files if isinstance(input_files, str) else ",".join(input_files)
    have = f"--input_file={named}: {n * raw_length + tail} tokens"
    if n == 0:
        raise BertJaxError(
            f"{have}, too short for one {spec.name} example of {raw_length} tokens (nothing "
            "written); give more text or a smaller --max_seq_length"
        )
    raise BertJaxError(
        f"{have} make {n} {spec.name} examples of {raw_length} tokens, fewer than the {num_files} "
        "output files (nothing written); give a smaller --num_shards or more text"
    )


def create_seq2seq_data(
    input_files: str | list[str],
    output_dir: str | None,
    spm_model: str,
    *,
    objective: str = "span_corruption",
    inputs_length: int = 512,
    num_shards: int = 1,
    output_files: list[str] | None = None,
    seed: int = 12345,
    max_line_chars: int = 100_000,
    block_bytes: int = 1 << 18,
) -> dict:
    """Text corpus -> seq2seq TFRecord shards + stats.json; returns the stats dict."""
    spec = objectives.get(objective)
    if not isinstance(spec, Seq2SeqObjective):
        raise BertJaxError(f"--objective={objective}: not an encoder-decoder objective "
                           f"({', '.join(objectives.seq2seq_names())})")  # fmt: skip
    raw_length, targets_length = _check(spec, inputs_length, num_shards, max_line_chars,
                                        block_bytes)  # fmt: skip
    vocab = T5Vocab(spm_model)
    if output_files is None:
        if output_dir is None:
            raise BertJaxError("give --output_dir (with --num_shards) or --output_file")
        output_files = shard_paths(output_dir, num_shards)
    stats_dir = epath.Path(output_dir) if output_dir else epath.Path(output_files[0]).parent
    sources = text_sources.resolve_inputs(input_files)
    text_sources.check_text(sources)
    for d in {stats_dir, *(epath.Path(f).parent for f in output_files)}:
        d.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(output_files)

    count = dict.fromkeys(("instances", "inputs_tokens", "targets_tokens", "documents"), 0)
    shards = ShardSet(output_files)
    decode = text_sources.DecodeStats()
    stream: list[int] = []
    try:
        for source in sources:
            for _, data in text_sources.source_blocks(source, block_bytes):
                lines = list(text_sources.decode_lines(data, max_line_chars, decode))
                nonempty = [line for line in lines if line]
                count["documents"] += sum(1 for chunk in data.split(b"\n\n") if chunk.strip())
                for ids in vocab.sp.EncodeAsIds(nonempty) if nonempty else []:
                    stream += ids
                full = len(stream) // raw_length * raw_length
                for start in range(0, full, raw_length):
                    j = count["instances"]
                    chunk = np.asarray(stream[start : start + raw_length], np.int64)
                    inputs, targets = spec.make_example(
                        chunk, np.random.default_rng((seed, j)), vocab.size
                    )
                    count["inputs_tokens"] += len(inputs)
                    count["targets_tokens"] += len(targets)
                    record = encode({"inputs": pad_to(inputs, inputs_length),
                                     "targets": pad_to(targets, targets_length)})  # fmt: skip
                    shards.write(j % len(output_files), record)
                    count["instances"] += 1
                del stream[:full]
        _check_enough(count["instances"], len(stream), raw_length, spec, input_files,
                      len(output_files))  # fmt: skip
    except BaseException:
        shards.abort()
        raise
    shards.close()
    n = count["instances"]
    summary = {
        "instances": n,
        "tokens": n * raw_length,  # text tokens in the examples (before corruption, no EOS)
        "dropped_tail_tokens": len(stream),
        "inputs_padding_fraction": 1 - count["inputs_tokens"] / max(n * inputs_length, 1),
        "targets_padding_fraction": 1 - count["targets_tokens"] / max(n * targets_length, 1),
        "documents": count["documents"],
        **{k: getattr(decode, k) for k in _COUNTERS},
        "mode": "seq2seq",
        "objective": spec.name,
        "features": [f.name for f in spec.shard_schema(inputs_length, targets_length)],
        "settings": {
            "objective": spec.name,
            "inputs_length": inputs_length,
            "targets_length": targets_length,
            "raw_length": raw_length,
            "random_seed": seed,
            "spm_model": str(spm_model),
            "pieces": vocab.pieces,
            "vocab_size": vocab.size,  # pieces + sentinels; checked by the training run
        },
        "output_files": [os.fspath(p) for p in output_files],
        **text_sources.embedded_fingerprints(sources),
    }
    write_text_atomic(stats_dir / "stats.json", bert_stats.dumps(summary))
    if output_dir is not None:
        remove_other_shard_sets(output_dir, num_shards, log)
    return summary
