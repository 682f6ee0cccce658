"""Our reader on shards that `bert-jax create-pretraining-data` wrote from real English text."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from bert_jax import objectives
from bert_jax.input import EvalInput, MaskingSpec, PretrainInput
from bert_jax.shards.example import decode_batch
from bert_jax.shards.tfrecord import read_records

L, P = 64, 10


@pytest.fixture(scope="module")
def real_shards(tmp_path_factory, uncased_vocab) -> dict:
    from bert_jax.corpus.embedded import write_corpus

    root = tmp_path_factory.mktemp("real")
    write_corpus(root / "corpus.txt", max_documents=80)
    out = {}
    for mode, extra in (("static", []), ("dynamic", ["--dynamic_masking"])):
        subprocess.run(
            [sys.executable, "-m", "bert_jax.cli", "create-pretraining-data",
             f"--input_file={root / 'corpus.txt'}", f"--output_dir={root / mode}",
             "--num_shards=2", f"--vocab_file={uncased_vocab}", f"--max_seq_length={L}",
             f"--max_predictions_per_seq={P}", "--dupe_factor=2", *extra],
            check=True, capture_output=True,
        )  # fmt: skip
        out[mode] = str(root / mode / "shard-*.tfrecord")
        out[mode + "_stats"] = json.loads((root / mode / "stats.json").read_text())
    return out


def test_static_shards_read_as_tensorflow_parses_them(real_shards):
    import tensorflow as tf

    files = sorted(str(p) for p in pathlib.Path(real_shards["static"]).parent.glob("shard-*"))
    spec = {k: tf.io.FixedLenFeature([L], tf.int64) for k in ("input_ids", "input_mask")}
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([P], tf.float32)
    spec["masked_lm_positions"] = tf.io.FixedLenFeature([P], tf.int64)
    theirs = {k: [] for k in spec}
    for records_B in tf.data.TFRecordDataset(files).batch(512):
        for k, v in tf.io.parse_example(records_B, spec).items():
            theirs[k].extend(v.numpy())
    reader = EvalInput(real_shards["static"], 32, L, P)
    got = list(reader)
    n = sum(int(b["example_mask"].sum()) for b in got)
    assert n == len(theirs["input_ids"]) == real_shards["static_stats"]["instances"]
    for key, rows in theirs.items():
        ours = np.concatenate([b[key] for b in got])[:n]
        np.testing.assert_array_equal(ours, np.stack(rows), err_msg=key)


def test_dynamic_masking_of_real_text(real_shards, uncased_vocab):
    spec = MaskingSpec.from_vocab_file(str(uncased_vocab))
    reader = PretrainInput(
        real_shards["dynamic"], 32, L, P, seed=0, num_epochs=1, dynamic_masking=spec
    )
    unmasked = objectives.get("mlm_nsp").shard_schema(L, P, static_masks=False)
    original = set()
    for path in pathlib.Path(real_shards["dynamic"]).parent.glob("shard-*"):
        ids = decode_batch(list(read_records(path)), unmasked)["input_ids"]
        original.update(row.astype(np.int32).tobytes() for row in ids)
    total = mask_tokens = 0
    for batch in reader:
        weights = batch["masked_lm_weights"]
        valid = weights > 0
        rows = np.nonzero(valid)[0]
        pos = batch["masked_lm_positions"][valid]
        labels = batch["masked_lm_ids"][valid]
        assert not np.isin(labels, spec.special_ids).any()
        n = batch["input_mask"].sum(1)
        np.testing.assert_array_equal(
            weights.sum(1), np.minimum(P, np.maximum(1, np.rint(n * 0.15)))
        )
        # Undoing the masks gives back an input sequence that is in the shards.
        restored = batch["input_ids"].copy()
        restored[rows, pos] = labels
        for row in range(restored.shape[0]):
            assert restored[row].tobytes() in original
        total += valid.sum()
        mask_tokens += (batch["input_ids"][rows, pos] == spec.mask_id).sum()
    static_fraction = real_shards["static_stats"]["masked_fraction"]
    tokens = real_shards["dynamic_stats"]["tokens"]
    assert total > 5000
    assert abs(mask_tokens / total - 0.8) < 0.03
    # Same num_to_predict rule as the static writer: about the same masked fraction.
    assert abs(total / tokens - static_fraction) < 0.01
