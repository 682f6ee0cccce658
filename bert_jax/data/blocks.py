"""One block of the fast data mode: bytes of whole documents -> serialized Examples + stats.

Shared by the local runner (bert_jax/data/pipeline.py, in worker processes) and the Beam runner
(bert_jax/data/beam_pipeline.py), so both write identical shards. Everything random in a block
is keyed by (seed, source, block[, dupe pass]): instance building by a `random.Random` per dupe
pass, the masks by a 64-bit block seed with the block's rows as example indices (the input
pipeline's dynamic masker, called statically).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import random
from collections.abc import Iterable

from bert_jax import objectives
from bert_jax.corpus import sources as text_sources
from bert_jax.data import batch, stats
from bert_jax.data.instances import InstanceConfig, Vocab, build_instances
from bert_jax.shards.example import encode_batch
from bert_jax.tokenization import ByteBpeTokenizer, FullTokenizer
from bert_jax.tokenization.byte_bpe import is_byte_bpe_file


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything a run (or a worker process) needs; picklable."""

    vocab_file: str
    cfg: InstanceConfig
    do_lower_case: bool = True
    random_seed: int = 12345
    dupe_factor: int = 10
    max_line_chars: int = 100_000
    block_bytes: int = 1 << 18


def shard_of(source_index: int, block_index: int, j: int, num_shards: int) -> int:
    return (source_index * 1_000_003 + block_index * 7919 + j) % num_shards


def block_seed(settings: Settings, source_index: int, block_index: int) -> int:
    """The 64-bit masking seed of a block: a function of (seed, source, block) only."""
    key = f"{settings.random_seed}/{source_index}/{block_index}/mask".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


def load_tokenizer(settings: Settings):
    """(FullTokenizer, or ByteBpeTokenizer for a vocab.json / tokenizer.json; Vocab); errors
    name the vocab file."""
    if is_byte_bpe_file(settings.vocab_file):  # RoBERTa: <s> ... </s>, never lower-cased
        tokenizer = ByteBpeTokenizer(settings.vocab_file)
        return tokenizer, Vocab.from_token_dict(tokenizer.vocab, settings.vocab_file)
    tokenizer = FullTokenizer(settings.vocab_file, do_lower_case=settings.do_lower_case)
    return tokenizer, Vocab.from_token_dict(tokenizer.vocab, settings.vocab_file)


def group_documents(lines: Iterable[str], token_ids: Iterable[list[int]], st: dict) -> list:
    """The reference's reading rule: a blank line starts a document, a line whose tokenization is
    empty is dropped without ending one, empty documents vanish."""
    docs: list[list[list[int]]] = [[]]
    for line, ids in zip(lines, token_ids, strict=True):
        if not line:
            docs.append([])
        elif ids:
            docs[-1].append(ids)
        else:
            st["empty_token_lines"] += 1
    docs = [d for d in docs if d]
    st["documents"] += len(docs)
    st["sentences"] += sum(len(d) for d in docs)
    return docs


def decode_lines(data: bytes, settings: Settings, st: dict) -> list[str]:
    ds = text_sources.DecodeStats()
    lines = list(text_sources.decode_lines(data, settings.max_line_chars, ds))
    st["lines"] += ds.lines
    st["invalid_utf8_lines"] += ds.invalid_utf8_lines
    st["long_lines_split"] += ds.long_lines_split
    st["text_bytes"] += ds.text_bytes
    return lines


def process_block(settings: Settings, tokenizer, vocab: Vocab, s: int, b: int, data: bytes):
    """Block bytes -> ([(j, serialized Example)], stats); a function of (settings, s, b, data)."""
    cfg = settings.cfg
    st = stats.new_stats(cfg.max_seq_length)
    lines = decode_lines(data, settings, st)
    nonempty = [line for line in lines if line]
    # Sub-batches keep the tokenizer's per-token Encoding objects from piling up.
    encoded = itertools.chain.from_iterable(
        tokenizer.encode_batch(nonempty[k : k + 2048]) for k in range(0, len(nonempty), 2048)
    )
    docs = group_documents(lines, (next(encoded) if line else [] for line in lines), st)
    objective = objectives.get(cfg.objective)
    pairing = objective.pairing
    if cfg.pack_sequences > 1 and pairing == "packed":
        # Packed rows keep attention inside each sequence: segments that stop at document ends,
        # packed back to full rows, are FULL-SENTENCES without attention across documents.
        pairing = "packed_docs"
    instances = []
    for dupe in range(settings.dupe_factor if docs else 0):
        rng = random.Random(f"{settings.random_seed}/{s}/{b}/{dupe}")
        instances += build_instances(pairing, docs, cfg, vocab, rng)
    if not instances:
        return [], st
    random.Random(f"{settings.random_seed}/{s}/{b}/shuffle").shuffle(instances)
    arrays = batch.pack(instances, cfg)
    batch.add_instance_stats(st, arrays, cfg)
    if cfg.pack_sequences > 1:
        rows_rng = random.Random(f"{settings.random_seed}/{s}/{b}/rows")
        arrays = batch.pack_rows(arrays, cfg.pack_sequences, rows_rng)
    if not cfg.dynamic_masking and objective.masking is not None:
        # The input pipeline's masker, with the block's rows as example indices.
        spec = batch.masking_spec(vocab, objective.masking, cfg)
        batch.mask(arrays, spec, cfg.max_predictions_per_seq, block_seed(settings, s, b))
    batch.add_record_stats(st, arrays, cfg)
    return list(enumerate(encode_batch(batch.columns(arrays, cfg)))), st
