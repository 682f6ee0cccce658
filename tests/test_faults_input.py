"""Fault matrix, training input (issue 17): corrupt, foreign and mismatched shards are refused
with one line naming the file and record (or batch) before a wrong id reaches the model. Real
shards of real English (the embedded corpus) written by create-pretraining-data, corrupted on
disk the way a bad disk or a wrong --config flag would."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from bert_jax.corpus import embedded as embedded_corpus
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.errors import BertJaxError
from bert_jax.input import PretrainInput
from bert_jax.pretraining.task import bert_config_from
from bert_jax.shards.example import decode, encode
from bert_jax.shards.tfrecord import TFRecordWriter, read_records
from bert_jax.train.config import pretrain_config

SEQ, PRED, VOCAB = 32, 5, 600


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> dict:
    from bert_jax.tokenization.vocab_builder import build_vocab

    root = tmp_path_factory.mktemp("fault_shards")
    embedded_corpus.write_corpus(root / "corpus.txt", max_bytes=60_000)
    build_vocab(str(root / "corpus.txt"), VOCAB, root, num_threads=1)
    create_pretraining_data(str(root / "corpus.txt"), str(root / "train"), str(root / "vocab.txt"),
                            num_shards=1, dupe_factor=1, max_seq_length=SEQ,
                            max_predictions_per_seq=PRED)  # fmt: skip
    shard = root / "train" / "shard-00000-of-00001.tfrecord"
    return {
        "root": root,
        "shard": shard,
        "vocab": root / "vocab.txt",
        "records": list(read_records(shard)),
    }


def _read(path, vocab_size=VOCAB, batches=10_000) -> int:
    """Batches read before the end of the data (one epoch); errors propagate."""
    it = PretrainInput(str(path), 8, SEQ, PRED, num_epochs=1, prefetch=0, vocab_size=vocab_size)
    n = 0
    for _ in range(batches):
        try:
            next(it)
        except StopIteration:
            break
        n += 1
    return n


def _bad_bytes(shards, tmp_path, name: str, edit) -> pathlib.Path:
    data = bytearray(shards["shard"].read_bytes())
    edit(data)
    path = tmp_path / name
    path.write_bytes(bytes(data))
    return path


def _rewrite(shards, tmp_path, name: str, index: int, token_id: int) -> pathlib.Path:
    """The shard with record `index`'s input_ids[3] set to `token_id`: valid CRCs, wrong id."""
    path = tmp_path / name
    with TFRecordWriter(path) as w:
        for i, record in enumerate(shards["records"]):
            if i == index:
                ex = decode(record)
                ex["input_ids"] = ex["input_ids"].copy()
                ex["input_ids"][3] = token_id
                record = encode(ex)
            w.write(record)
    return path


def test_clean_shard_reads_to_the_end(shards):
    assert _read(shards["shard"]) == len(shards["records"]) // 8 > 10  # the control case


def test_flipped_payload_byte_is_a_crc_error(shards, tmp_path):
    length = len(shards["records"][0])
    at = 12 + 16 + length + 12 + 40  # 40 bytes into record 1's payload

    path = _bad_bytes(shards, tmp_path, "payload.tfrecord", lambda d: d.__setitem__(at, d[at] ^ 1))
    with pytest.raises(BertJaxError, match=r"payload\.tfrecord: record 1 .*bad CRC"):
        _read(path)


def test_flipped_length_field_is_a_crc_error_not_a_memory_error(shards, tmp_path):
    path = _bad_bytes(shards, tmp_path, "length.tfrecord", lambda d: d.__setitem__(6, 0x7F))
    with pytest.raises(BertJaxError, match=r"length\.tfrecord: record 0 .*bad CRC \(length\)"):
        _read(path)


def test_text_file_given_as_shards_is_refused(shards, tmp_path):
    path = tmp_path / "corpus.tfrecord"
    path.write_bytes((shards["root"] / "corpus.txt").read_bytes())
    with pytest.raises(BertJaxError, match=r"corpus\.tfrecord: record 0 .*bad CRC"):
        _read(path)


def test_zero_byte_shard_is_refused(tmp_path):
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    with pytest.raises(BertJaxError, match=r"empty\.tfrecord: no records"):
        _read(tmp_path / "empty.tfrecord")


def test_out_of_vocab_id_in_first_record_refused_at_start(shards, tmp_path):
    path = _rewrite(shards, tmp_path, "oov0.tfrecord", 0, VOCAB + 5)
    with pytest.raises(
        BertJaxError, match=rf"oov0\.tfrecord: record 0: input_ids has token id {VOCAB + 5}"
    ):
        PretrainInput(str(path), 8, SEQ, PRED, prefetch=0, vocab_size=VOCAB)


def test_out_of_vocab_id_later_refused_in_its_batch(shards, tmp_path):
    """A record with a valid CRC but an id past the table (NaN on the accelerator) stops the
    reader at the batch holding it, with the batches before it delivered."""
    path = _rewrite(shards, tmp_path, "oov.tfrecord", 100, VOCAB)
    with pytest.raises(
        BertJaxError, match=rf"oov\.tfrecord: batch \d+: input_ids has token id {VOCAB}\b"
    ):
        _read(path)


def test_shorter_vocab_than_the_shards_is_named(shards, tmp_path):
    """Shards from a 600-token vocab, a vocab_file missing its last line: stats.json beside the
    shards records the size they were made with, so the mismatch is named before any batch."""
    short = tmp_path / "vocab_short.txt"
    short.write_text("".join(t + "\n" for t in shards["vocab"].read_text().splitlines()[:-1]))
    config = pretrain_config("tiny")
    config.vocab_file = str(short)
    size = bert_config_from(config).vocab_size
    assert size == VOCAB - 1
    assert (
        json.loads((shards["root"] / "train" / "stats.json").read_text())["settings"]["vocab_size"]
        == VOCAB
    )
    with pytest.raises(
        BertJaxError,
        match=rf"stats\.json: the shards were written with a {VOCAB}-token vocab, "
        rf"this run's vocab has {VOCAB - 1}",
    ):
        _read(shards["shard"], vocab_size=size)


def test_vocab_with_a_duplicated_token_still_covers_every_id(shards, tmp_path):
    """A repeated token keeps its last id (as the reference's load_vocab), so len(vocab) is one
    short of the ids in use; the embedding table is sized by the highest id instead."""
    lines = shards["vocab"].read_text().splitlines()
    lines[300] = lines[301]
    dup = tmp_path / "vocab_dup.txt"
    dup.write_text("".join(t + "\n" for t in lines))
    config = pretrain_config("tiny")
    config.vocab_file = str(dup)
    size = bert_config_from(config).vocab_size
    assert size == VOCAB
    assert _read(shards["shard"], vocab_size=size) == len(shards["records"]) // 8
    ids = np.concatenate([decode(r)["input_ids"] for r in shards["records"]])
    assert ids.max() == VOCAB - 1 or ids.max() < VOCAB  # every id in use fits the table
