"""The shard codec (bert_jax.shards) against TensorFlow's TFRecord writer, Example classes and
parser."""

from __future__ import annotations

import numpy as np
import pytest

from bert_jax import objectives
from bert_jax.data.instances import Instance, InstanceConfig, instance_features
from bert_jax.errors import BertJaxError
from bert_jax.shards import example, tfrecord
from bert_jax.shards.schema import Feature

tf = pytest.importorskip("tensorflow")

PAYLOADS = [b"", b"x", b"hello tfrecord" * 50, bytes(range(256)) * 300]


def test_framing_is_byte_identical_to_tensorflow_writer(tmp_path):
    ours, theirs = tmp_path / "ours.tfrecord", tmp_path / "theirs.tfrecord"
    with tfrecord.TFRecordWriter(ours) as w:
        for p in PAYLOADS:
            w.write(p)
    with tf.io.TFRecordWriter(str(theirs)) as w:
        for p in PAYLOADS:
            w.write(p)
    assert ours.read_bytes() == theirs.read_bytes()
    assert list(tfrecord.read_records(theirs)) == PAYLOADS
    assert list(tfrecord.read_records(theirs, limit=2)) == PAYLOADS[:2]
    assert tfrecord.count_records(theirs) == len(PAYLOADS)
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(ours))] == PAYLOADS


def test_reader_offsets_resume_exactly_across_chunks(tmp_path):
    path = tmp_path / "r.tfrecord"
    payloads = [bytes([i]) * (i * 37 % 500) for i in range(60)]
    with tfrecord.TFRecordWriter(path) as w:
        for p in payloads:
            w.write(p)
    # Chunks smaller than some records: records span chunk boundaries.
    reader = tfrecord.RecordReader(path, chunk_bytes=300)
    offsets = [reader.offset]
    for record, want in zip(reader, payloads, strict=False):
        assert record == want
        offsets.append(reader.offset)
    assert next(reader, None) is None and offsets[-1] == path.stat().st_size
    for i in (1, 17, 59):
        with tfrecord.RecordReader(path, offsets[i], chunk_bytes=256) as resumed:
            assert list(resumed) == payloads[i:]


def _tf_example(features: dict) -> tf.train.Example:
    def feature(values):
        a = np.asarray(values)
        if a.dtype.kind in "iub":
            return tf.train.Feature(int64_list=tf.train.Int64List(value=a.ravel().tolist()))
        if a.dtype.kind == "f":
            return tf.train.Feature(float_list=tf.train.FloatList(value=a.ravel().tolist()))
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=a.ravel().tolist()))

    return tf.train.Example(
        features=tf.train.Features(feature={k: feature(v) for k, v in features.items()})
    )


def test_encode_and_encode_batch_bytes_equal_tensorflow_serialisation():
    rng = np.random.default_rng(0)
    columns = {
        "input_ids": rng.integers(0, 30522, (5, 16)),
        "input_mask": (rng.random((5, 16)) < 0.7).astype(np.int64),
        "large_and_negative": np.array([[0, 127, 128, 2**35, 2**62, -1, -(2**63)]] * 5),
        "masked_lm_weights": rng.random((5, 4)).astype(np.float32),
        "next_sentence_labels": rng.integers(0, 2, (5, 1)),
    }
    rows = example.encode_batch(columns)
    for r, record in enumerate(rows):
        features = {k: v[r] for k, v in columns.items()}
        assert record == example.encode(features)
        theirs = _tf_example(features)
        # Protobuf writes map entries in hash order (which varies per process) unless asked
        # for deterministic output, which sorts the keys: compare both ways.
        assert tf.train.Example.FromString(record) == theirs
        assert example.encode(dict(sorted(features.items()))) == theirs.SerializeToString(
            deterministic=True
        )
    odd = {"b": [b"abc", b"", b"x" * 300], "e": [], "f": [0.5, -2.0], "i": [3, -7, 2**40]}
    assert example.encode(odd) == _tf_example(odd).SerializeToString(deterministic=True)
    decoded = example.decode(example.encode(odd))
    assert decoded["b"].tolist() == odd["b"] and decoded["i"].tolist() == odd["i"]


def test_tensorflow_parses_our_examples_with_reference_spec(tmp_path):
    cfg = InstanceConfig(max_seq_length=16, max_predictions_per_seq=4)
    inst = Instance(
        input_ids=[101, 7592, 103, 2088, 102, 2129, 30521, 102],
        segment_ids=[0, 0, 0, 0, 0, 1, 1, 1],
        next_sentence_label=1,
        masked_lm_positions=[2, 6],
        masked_lm_ids=[1010, 2003],
    )
    path = tmp_path / "ex.tfrecord"
    data = example.encode(instance_features(inst, cfg))
    with tfrecord.TFRecordWriter(path) as w:
        w.write(data)
    schema = objectives.get("mlm_nsp").shard_schema(16, 4, static_masks=True)
    spec = {
        f.name: tf.io.FixedLenFeature([f.length], tf.float32 if f.dtype == "float32" else tf.int64)
        for f in schema
    }
    (record,) = list(tf.data.TFRecordDataset(str(path)))
    parsed = {k: v.numpy() for k, v in tf.io.parse_single_example(record, spec).items()}
    np.testing.assert_array_equal(parsed["input_ids"], inst.input_ids + [0] * 8)
    np.testing.assert_array_equal(parsed["input_mask"], [1] * 8 + [0] * 8)
    np.testing.assert_array_equal(parsed["segment_ids"], inst.segment_ids + [0] * 8)
    np.testing.assert_array_equal(parsed["masked_lm_positions"], [2, 6, 0, 0])
    np.testing.assert_array_equal(parsed["masked_lm_ids"], [1010, 2003, 0, 0])
    np.testing.assert_array_equal(parsed["masked_lm_weights"], [1.0, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(parsed["next_sentence_labels"], [1])
    batch = example.decode_batch([data, data], schema)
    for name, value in parsed.items():
        np.testing.assert_array_equal(batch[name][1], value)
    assert example.check_first_record(str(path), schema).keys() == parsed.keys()


def test_decode_batch_names_the_feature_of_a_mismatching_record():
    schema = (Feature("ids", 3, "int64"), Feature("w", 2, "float32"))
    good = example.encode({"ids": [1, 200, 3], "w": [1.0, 0.0]})
    # Per-record lengths that add up to the batch's total must not pass the fast path.
    short, long = (
        example.encode({"ids": [1, 2], "w": [1.0, 0.0]}),
        example.encode({"ids": [1, 2, 300, 4], "w": [1.0, 0.0]}),
    )
    with pytest.raises(BertJaxError, match=r"record 0 of a batch: feature 'ids' has length 2"):
        example.decode_batch([short, long], schema)
    floats = example.encode({"ids": [1.0, 2.0, 3.0], "w": [1.0, 0.0]})
    with pytest.raises(BertJaxError, match="record 1 of a batch: feature 'ids' is float_list"):
        example.decode_batch([good, floats], schema)
    with pytest.raises(BertJaxError, match="record 0 of a batch has no feature 'w'"):
        example.decode_batch([example.encode({"ids": [1, 2, 3]})], schema)
    with pytest.raises(BertJaxError, match="record 0 of a batch is not a tf.train.Example"):
        example.decode_batch([b"\xff\xff"], schema)


def test_bad_crc_names_file_record_and_offset(tmp_path):
    path = tmp_path / "bad.tfrecord"
    with tfrecord.TFRecordWriter(path) as w:
        w.write(b"first record")
        w.write(b"second record")
    data = bytearray(path.read_bytes())
    offset = 16 + len(b"first record")
    data[offset + 12 + 3] ^= 0xFF  # a payload byte of record 1
    path.write_bytes(bytes(data))
    for chunk_bytes in (7, 30, 1 << 20):  # the bad record inside or at the start of a chunk
        reader = tfrecord.RecordReader(path, chunk_bytes=chunk_bytes)
        assert next(reader) == b"first record"  # records before the bad one still arrive
        for _ in range(2):  # and nothing after it
            with pytest.raises(
                BertJaxError, match=rf"bad\.tfrecord: record 1 \(offset {offset}\): bad CRC"
            ):
                next(reader)
    assert list(tfrecord.read_records(path, verify=False))[1] != b"second record"
    with pytest.raises(BertJaxError, match=rf"bad\.tfrecord: record at offset {offset}: bad"):
        list(tfrecord.RecordReader(path, offset))
    data[offset + 12 + 3] ^= 0xFF
    data[offset + 2] ^= 0x01  # the length of record 1
    path.write_bytes(bytes(data))
    with pytest.raises(BertJaxError, match=r"record 1 \(offset \d+\): bad CRC \(length\)"):
        list(tfrecord.read_records(path))
    with pytest.raises(BertJaxError, match=r"record 1 \(offset \d+\): bad CRC \(length\)"):
        tfrecord.count_records(path)
    path.write_bytes(bytes(data[: offset + 5]))
    with pytest.raises(BertJaxError, match="record 1 .*truncated"):
        list(tfrecord.read_records(path))
    with pytest.raises(BertJaxError, match="record 1 .*truncated"):
        tfrecord.count_records(path)


def test_failed_write_leaves_nothing_under_final_name(tmp_path):
    path = tmp_path / "out.tfrecord"
    with pytest.raises(RuntimeError), tfrecord.TFRecordWriter(path) as w:
        w.write(b"partial")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(BertJaxError, match="cannot write output"):
        tfrecord.TFRecordWriter(blocker / "out.tfrecord")
