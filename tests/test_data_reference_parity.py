"""--reference_compat against google-research/bert's own output (tests/fixtures/reference/README.md
says how the golden files were made): the same instances in the same order, record for record."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.shards.example import decode
from bert_jax.shards.tfrecord import read_records

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "reference"
FLAGS = json.loads((FIXTURES / "flags.json").read_text())["common"]


def _records(path) -> list[dict[str, np.ndarray]]:
    return [decode(r) for r in read_records(path)]


def _assert_same_instances(ours_path, golden_path) -> None:
    ours, golden = _records(ours_path), _records(golden_path)
    assert len(ours) == len(golden)
    for i, (a, b) in enumerate(zip(ours, golden, strict=True)):
        assert sorted(a) == sorted(b), i  # same feature names
        for name in b:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"record {i} {name}")


def test_cli_reference_compat_matches_google_research_bert(tmp_path, uncased_vocab):
    out = tmp_path / "plain.tfrecord"
    flags = [f"--{k}={v}" for k, v in FLAGS.items() if k != "input_file"]
    cmd = [
        sys.executable,
        "-m",
        "bert_jax.cli",
        "create-pretraining-data",
        f"--input_file={FIXTURES / 'corpus.txt'}",
        f"--output_file={out}",
        f"--vocab_file={uncased_vocab}",
        "--do_whole_word_mask=false",
        "--reference_compat",
        *flags,
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    _assert_same_instances(out, FIXTURES / "reference_plain.tfrecord")
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["instances"] == 175 and stats["mode"] == "reference_compat"


def test_whole_word_masking_matches_google_research_bert(tmp_path, uncased_vocab):
    out = tmp_path / "wwm.tfrecord"
    create_pretraining_data(
        str(FIXTURES / "corpus.txt"),
        None,
        str(uncased_vocab),
        output_files=[str(out)],
        do_whole_word_mask=True,
        reference_compat=True,
        max_seq_length=FLAGS["max_seq_length"],
        max_predictions_per_seq=FLAGS["max_predictions_per_seq"],
        seed=FLAGS["random_seed"],
        dupe_factor=FLAGS["dupe_factor"],
        masked_lm_prob=FLAGS["masked_lm_prob"],
        short_seq_prob=FLAGS["short_seq_prob"],
    )
    _assert_same_instances(out, FIXTURES / "reference_wwm.tfrecord")


def test_round_robin_over_output_files_as_reference(tmp_path, uncased_vocab):
    outs = [str(tmp_path / f"part{i}.tfrecord") for i in range(3)]
    create_pretraining_data(
        str(FIXTURES / "corpus.txt"),
        None,
        str(uncased_vocab),
        output_files=outs,
        reference_compat=True,
        max_seq_length=64,
        max_predictions_per_seq=10,
        dupe_factor=3,
    )
    golden = _records(FIXTURES / "reference_plain.tfrecord")
    for i, path in enumerate(outs):
        part = _records(path)
        assert len(part) == len(golden[i::3])
        for a, b in zip(part, golden[i::3], strict=True):
            np.testing.assert_array_equal(a["input_ids"], b["input_ids"])


def test_tensorflow_reads_reference_compat_output(tmp_path, uncased_vocab):
    tf = pytest.importorskip("tensorflow")
    out = tmp_path / "o.tfrecord"
    create_pretraining_data(
        str(FIXTURES / "corpus.txt"), None, str(uncased_vocab), output_files=[str(out)],
        reference_compat=True, max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1,
    )  # fmt: skip
    spec = {
        "input_ids": tf.io.FixedLenFeature([64], tf.int64),
        "input_mask": tf.io.FixedLenFeature([64], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([64], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([10], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([10], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([10], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    ours = _records(out)
    for i, record in enumerate(tf.data.TFRecordDataset(str(out))):
        parsed = tf.io.parse_single_example(record, spec)
        for name, value in parsed.items():
            np.testing.assert_array_equal(value.numpy(), ours[i][name])
    assert i + 1 == len(ours)
