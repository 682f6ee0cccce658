"""The Grain reader against shards written by TensorFlow and parsed by TensorFlow's own parser."""

from __future__ import annotations

import json
import pathlib

import jax
import numpy as np
import pytest

from bert_jax.errors import BertJaxError
from bert_jax.input import EvalInput, MaskingSpec, PretrainInput

L, P = 32, 5
RECORDS_PER_FILE = (37, 41, 29, 53)  # 160 records
SPEC = MaskingSpec(mask_id=103, vocab_size=30522, special_ids=(101, 102, 0))
KEYS_I64 = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids")


def _example_features(uid: int, rng: np.random.Generator, with_mlm: bool) -> dict:
    n = int(rng.integers(8, L + 1))
    a = int(rng.integers(2, n - 2))
    ids = np.zeros(L, np.int64)
    ids[:n] = rng.integers(1000, 30000, n)
    ids[0], ids[a], ids[n - 1] = 101, 102, 102
    ids[1] = 1000 + uid  # identifies the record in the batches
    mask = (np.arange(L) < n).astype(np.int64)
    segment = ((np.arange(L) > a) & (np.arange(L) < n)).astype(np.int64)
    features = {"input_ids": ids, "input_mask": mask, "segment_ids": segment}
    if with_mlm:
        k = int(rng.integers(1, P + 1))
        positions = np.zeros(P, np.int64)
        positions[:k] = np.sort(rng.choice(np.arange(1, n - 1), size=k, replace=False))
        features["masked_lm_positions"] = positions
        features["masked_lm_ids"] = np.where(np.arange(P) < k, ids[positions], 0)
        features["masked_lm_weights"] = (np.arange(P) < k).astype(np.float32)
    features["next_sentence_labels"] = np.array([uid % 2], np.int64)
    return features


def write_shards(directory: pathlib.Path, with_mlm: bool, counts=RECORDS_PER_FILE) -> list[str]:
    """TFRecord files written by TensorFlow (tf.io.TFRecordWriter + tf.train.Example)."""
    import tensorflow as tf

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for f, count in enumerate(counts):
        path = str(directory / f"train-{f:05d}-of-{len(counts):05d}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for r in range(count):
                feature = {}
                for key, value in _example_features(f * 100 + r, rng, with_mlm).items():
                    if value.dtype == np.float32:
                        feature[key] = tf.train.Feature(
                            float_list=tf.train.FloatList(value=value.tolist())
                        )
                    else:
                        feature[key] = tf.train.Feature(
                            int64_list=tf.train.Int64List(value=value.tolist())
                        )
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
        paths.append(path)
    return paths


def tf_parse(paths: list[str], with_mlm: bool) -> dict[str, np.ndarray]:
    """The reference's _decode_record: FixedLenFeature parse, int64 -> int32, in file order."""
    import tensorflow as tf

    spec = {k: tf.io.FixedLenFeature([L], tf.int64) for k in KEYS_I64[:3]}
    if with_mlm:
        spec.update({k: tf.io.FixedLenFeature([P], tf.int64) for k in KEYS_I64[3:]})
        spec["masked_lm_weights"] = tf.io.FixedLenFeature([P], tf.float32)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    rows: dict[str, list] = {k: [] for k in spec}
    for records_B in tf.data.TFRecordDataset(paths).batch(512):  # parse_example = batched parse
        for k, v in tf.io.parse_example(records_B, spec).items():
            rows[k].append(v.numpy().astype(np.int32 if v.dtype == tf.int64 else np.float32))
    return {k: np.concatenate(v) for k, v in rows.items()}


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("shards")
    static = write_shards(root / "static", with_mlm=True)
    unmasked = write_shards(root / "unmasked", with_mlm=False)
    return {
        "static": static,
        "unmasked": unmasked,
        "static_tf": tf_parse(static, True),
        "glob": str(root / "static" / "train-*.tfrecord"),
    }


@pytest.fixture(scope="module")
def batch_sharding() -> jax.NamedSharding:
    mesh = jax.make_mesh(
        (2, 2, 2), ("data", "fsdp", "tensor"), axis_types=(jax.sharding.AxisType.Auto,) * 3
    )
    return jax.NamedSharding(mesh, jax.P(("data", "fsdp")))


def uids(batch) -> list[int]:
    return (np.asarray(batch["input_ids"])[:, 1] - 1000).tolist()


def take(iterator, n: int) -> list[dict[str, np.ndarray]]:
    return [{k: np.asarray(v) for k, v in next(iterator).items()} for _ in range(n)]


def test_batches_equal_the_records_tensorflow_parses(shards, batch_sharding):
    reader = PretrainInput(
        shards["glob"], 16, L, P, shuffle=False, num_epochs=1, cycle_length=1,
        sharding=batch_sharding,
    )  # fmt: skip
    expected = shards["static_tf"]
    total = sum(RECORDS_PER_FILE)
    got = list(reader)
    assert len(got) == total // 16  # last partial batch dropped in training
    first = got[0]
    assert first["input_ids"].sharding.spec == jax.P(("data", "fsdp"))
    assert len(first["input_ids"].addressable_shards) == 8
    for key, value in first.items():
        assert value.dtype == (
            np.float32 if key in ("masked_lm_weights", "example_mask") else np.int32
        )
        assert value.shape[0] == 16
    for key in expected:
        ours = np.concatenate([np.asarray(b[key]) for b in got])
        theirs = expected[key][: len(ours)]
        if key == "next_sentence_labels":
            theirs = theirs[:, 0]
        np.testing.assert_array_equal(ours, theirs, err_msg=key)
    np.testing.assert_array_equal(np.concatenate([b["example_mask"] for b in got]), 1.0)


def test_shuffled_epoch_is_a_permutation_and_epochs_differ(shards):
    all_uids = [f * 100 + r for f, n in enumerate(RECORDS_PER_FILE) for r in range(n)]
    # Window shuffle: one epoch (160 = 40 x 4) is a permutation of all records, not file order.
    reader = PretrainInput(shards["static"], 4, L, P, seed=3, num_epochs=1, shuffle_window=20)
    order = sum((uids(b) for b in reader), [])
    assert sorted(order) == all_uids and order != all_uids
    # File order alone (window 1, one file at a time): whole files, reshuffled every epoch.
    reader = PretrainInput(
        shards["static"], 4, L, P, seed=3, num_epochs=2, shuffle_window=1, cycle_length=1
    )
    order = sum((uids(b) for b in reader), [])
    assert len(order) == 320
    file_orders = [
        list(dict.fromkeys(u // 100 for u in order[e * 160 : (e + 1) * 160])) for e in (0, 1)
    ]
    for e, files in enumerate(file_orders):
        expected = sum(([f * 100 + r for r in range(RECORDS_PER_FILE[f])] for f in files), [])
        assert order[e * 160 : (e + 1) * 160] == expected
    assert sorted(file_orders[0]) == [0, 1, 2, 3] and file_orders[0] != file_orders[1]


def test_two_processes_read_disjoint_files(shards):
    seen = []
    for index in range(2):
        reader = PretrainInput(
            shards["static"], 8, L, P, seed=1, num_epochs=1, process_index=index, process_count=2
        )
        assert reader.batch_size == 4
        assert reader.files == shards["static"][index::2]
        got = set(sum((uids(b) for b in reader), []))
        files = {int(pathlib.Path(f).name[6:11]) for f in reader.files}
        assert {u // 100 for u in got} == files
        seen.append(got)
    assert not seen[0] & seen[1]


@pytest.mark.parametrize("masking", [None, SPEC])
def test_resume_continues_exactly(shards, batch_sharding, masking):
    files = shards["static"] if masking is None else shards["unmasked"]

    def make():
        return PretrainInput(
            files, 16, L, P, seed=7, shuffle_window=24, cycle_length=3, prefetch=3,
            sharding=batch_sharding, dynamic_masking=masking,
        )  # fmt: skip

    reference = make()
    states, batches = [], []
    for _ in range(16):  # > one epoch (160 records), windows of 24 cut across batches
        states.append(json.loads(json.dumps(reference.get_state())))
        batches.append(take(reference, 1)[0])
    for k in (0, 5, 11, 3):
        resumed = reference if k == 3 else make()  # k=3: rewind the running (prefetching) iterator
        resumed.set_state(states[k])
        for expected, got in zip(batches[k : k + 5], take(resumed, 5), strict=True):
            for key in expected:
                np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


def test_resume_from_the_same_shards_at_another_path(shards, tmp_path):
    """A run carried to another machine reads its shards from another directory: its state
    resumes there (and a state saved by full paths before 2026-11-30 resumes where it was)."""
    import shutil

    from bert_jax.input.pipeline import files_fingerprint_before_2026_11_30

    files = shards["static"]
    reference = PretrainInput(files, 8, L, P, seed=3)
    take(reference, 2)
    state = json.loads(json.dumps(reference.get_state()))
    expected = take(reference, 3)
    moved = [str(shutil.copy(f, tmp_path / pathlib.Path(f).name)) for f in files]
    by_paths = files_fingerprint_before_2026_11_30(files)
    old_form = {**state, "config": {**state["config"], "files": by_paths}}
    for where, saved in ((moved, state), (files, old_form)):
        resumed = PretrainInput(where, 8, L, P, seed=3)
        resumed.set_state(saved)
        for want, got in zip(expected, take(resumed, 3), strict=True):
            for key in want:
                np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    with pytest.raises(BertJaxError, match="files="):  # by full paths: not where it was saved
        PretrainInput(moved, 8, L, P, seed=3).set_state(old_form)
    with pytest.raises(BertJaxError, match="files="):  # other shards (one left out)
        PretrainInput(moved[1:], 8, L, P, seed=3).set_state(state)


def test_restore_with_other_settings_is_refused(shards):
    state = PretrainInput(shards["static"], 8, L, P, seed=1).get_state()
    other = PretrainInput(shards["static"], 8, L, P, seed=2)
    with pytest.raises(BertJaxError, match="seed=1"):
        other.set_state(state)


def test_dynamic_masking_from_unmasked_shards(shards):
    reader = PretrainInput(
        shards["unmasked"], 16, L, P, seed=5, shuffle=False, num_epochs=1, cycle_length=1,
        dynamic_masking=SPEC,
    )  # fmt: skip
    original = tf_parse(shards["unmasked"], False)["input_ids"]
    batch = next(reader)
    ids, positions = batch["input_ids"], batch["masked_lm_positions"]
    weights, labels = batch["masked_lm_weights"], batch["masked_lm_ids"]
    for row in range(16):
        n = int(batch["input_mask"][row].sum())
        k = int(weights[row].sum())
        assert k == min(P, max(1, round(n * 0.15)))
        pos = positions[row, :k]
        assert list(pos) == sorted(pos) and len(set(pos)) == k
        np.testing.assert_array_equal(labels[row, :k], original[row, pos])
        assert not np.isin(original[row, pos], [101, 102, 0]).any()
        unmasked = np.setdiff1d(np.arange(L), pos)
        np.testing.assert_array_equal(ids[row, unmasked], original[row, unmasked])


def test_eval_reads_every_record_once_with_padding(shards, batch_sharding):
    reader = EvalInput(shards["glob"], 16, L, P, sharding=batch_sharding)
    total = sum(RECORDS_PER_FILE)
    assert len(reader) == -(-total // 16)
    got = list(reader)
    assert len(got) == len(reader)
    mask = np.concatenate([np.asarray(b["example_mask"]) for b in got])
    assert mask.sum() == total and (mask[:total] == 1).all()
    ids = np.concatenate([np.asarray(b["input_ids"]) for b in got])
    np.testing.assert_array_equal(ids[:total], shards["static_tf"]["input_ids"])
    assert (ids[total:] == 0).all()
    weights = np.concatenate([np.asarray(b["masked_lm_weights"]) for b in got])
    assert (weights[total:] == 0).all()
    assert len(list(reader)) == len(reader)  # a second pass works


def test_eval_processes_agree_on_the_number_of_batches(shards):
    readers = [
        EvalInput(shards["static"], 8, L, P, process_index=i, process_count=2) for i in range(2)
    ]
    counts = [sum(RECORDS_PER_FILE[i::2]) for i in range(2)]
    assert [r.num_examples for r in readers] == counts
    for reader, count in zip(readers, counts, strict=True):
        got = list(reader)
        assert len(got) == -(-max(counts) // 4)
        assert sum(b["example_mask"].sum() for b in got) == count


# ------------------------------------------------------------------------------- start-time checks


def test_no_files_match(tmp_path):
    with pytest.raises(BertJaxError, match=r"train-\*\.tfrecord: no files match"):
        PretrainInput(str(tmp_path / "train-*.tfrecord"), 8, L, P)


def test_missing_masked_lm_features_name_the_file(shards):
    with pytest.raises(
        BertJaxError,
        match=r"train-00000-of-00004.tfrecord: record 0 has no feature 'masked_lm_positions'",
    ):  # noqa: E501
        PretrainInput(shards["unmasked"], 8, L, P)


def test_wrong_sequence_length(shards):
    with pytest.raises(BertJaxError, match="'input_ids' has length 32, expected 64"):
        PretrainInput(shards["static"], 8, 64, P)


def test_fewer_files_than_processes(shards):
    with pytest.raises(BertJaxError, match="4 input files for 8 processes"):
        PretrainInput(shards["static"], 8, L, P, process_index=0, process_count=8)


def test_batch_not_divisible(shards, batch_sharding):
    with pytest.raises(BertJaxError, match="not divisible by the data-parallel size 4"):
        PretrainInput(shards["static"], 6, L, P, sharding=batch_sharding)
    with pytest.raises(BertJaxError, match="not divisible by the process count 2"):
        PretrainInput(shards["static"], 5, L, P, process_index=0, process_count=2)


def test_orbax_checkpoint_with_grains_handler_resumes(shards, tmp_path):
    import grain
    import orbax.checkpoint as ocp

    def make():
        return PretrainInput(shards["unmasked"], 8, L, P, seed=2, dynamic_masking=SPEC)

    reader = make()
    take(reader, 3)
    with ocp.CheckpointManager(tmp_path / "ckpt", item_names=("input",)) as manager:
        manager.save(3, args=ocp.args.Composite(input=grain.checkpoint.CheckpointSave(reader)))
    expected = take(reader, 2)
    assert (tmp_path / "ckpt" / "3" / "input" / "process_0-of-1.json").exists()
    resumed = make()
    with ocp.CheckpointManager(tmp_path / "ckpt", item_names=("input",)) as manager:
        manager.restore(
            3, args=ocp.args.Composite(input=grain.checkpoint.CheckpointRestore(resumed))
        )
    for want, got in zip(expected, take(resumed, 2), strict=True):
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_tensorflow_records_take_the_fast_packed_path(shards, monkeypatch):
    from bert_jax import objectives
    from bert_jax.shards import example
    from bert_jax.shards.tfrecord import read_records

    raw = list(read_records(shards["static"][0]))
    schema = objectives.get("mlm_nsp").shard_schema(L, P, static_masks=True)
    slow = example._decode_batch_slow(raw, schema)

    def refuse(*args):
        raise AssertionError("fell back to the slow parser")

    monkeypatch.setattr(example, "_decode_batch_slow", refuse)
    fast = example.decode_batch(raw, schema)
    for f in schema:
        np.testing.assert_array_equal(fast[f.name], slow[f.name], err_msg=f.name)
        assert fast[f.name].dtype == slow[f.name].dtype


def test_varints_match_protobuf_for_large_and_negative_values(monkeypatch):
    from bert_jax.shards import example
    from bert_jax.shards.schema import Feature

    monkeypatch.setattr(example, "_decode_batch_slow", None)  # must not be needed

    values = np.array([0, 1, 127, 128, 300, 30521, 2**31, 2**62, -1, -(2**40)], np.int64)
    record = example.Example()
    record.features.feature["v"].int64_list.value.extend(values.tolist())
    schema = (Feature("v", values.size, "int64"),)
    batch = example.decode_batch([record.SerializeToString()] * 2, schema)
    np.testing.assert_array_equal(batch["v"][1], values)


def test_a_flipped_byte_stops_training_naming_file_and_offset(shards, tmp_path):
    import shutil

    from bert_jax.shards.tfrecord import RecordReader

    path = tmp_path / "train-00000-of-00001.tfrecord"
    shutil.copy(shards["static"][1], path)
    with RecordReader(path) as records:
        for _ in range(19):
            next(records)
        offset = records.offset  # where record 19 starts
    data = bytearray(path.read_bytes())
    # Record 19 is uid 119: input ids start 101, 1000 + 119 (varints 65 df 08); 1119 -> 1118.
    data[data.index(b"\x65\xdf\x08", offset) + 1] ^= 0x01
    path.write_bytes(bytes(data))
    reader = PretrainInput(str(path), 8, L, P, shuffle=False, num_epochs=1, prefetch=0)
    assert len(take(reader, 2)) == 2  # records 0-15 are intact
    with pytest.raises(
        BertJaxError, match=rf"train-00000-of-00001\.tfrecord: record 19 \(offset {offset}\): bad"
    ):
        next(reader)
    unchecked = PretrainInput(str(path), 8, L, P, shuffle=False, num_epochs=1, verify_crc=False)
    got = [uid for batch in unchecked for uid in uids(batch)]  # the corrupt id, no error
    assert len(got) == RECORDS_PER_FILE[1] // 8 * 8 and got.count(118) == 2 and 119 not in got


def test_dynamic_masking_reads_already_masked_shards_for_their_text(shards):
    """Static masks under dynamic masking: the text is restored from masked_lm_ids and masked
    afresh (tests/test_faults_pretrain_family.py checks the restored tokens on real shards)."""
    batch = next(PretrainInput(shards["static"], 8, L, P, dynamic_masking=SPEC, shuffle=False))
    assert set(batch) == set(next(PretrainInput(shards["unmasked"], 8, L, P,
                                                dynamic_masking=SPEC)))  # fmt: skip
    assert np.asarray(batch["masked_lm_weights"]).any()


def test_simulated_processes_need_numpy_output(shards, batch_sharding):
    with pytest.raises(BertJaxError, match="process_count=2 but JAX runs 1 processes"):
        PretrainInput(
            shards["static"], 8, L, P, sharding=batch_sharding, process_index=0, process_count=2
        )


def test_eval_with_fewer_files_than_processes_pads_the_idle_process(shards):
    one_file = shards["static"][:1]
    idle = EvalInput(one_file, 8, L, P, process_index=1, process_count=2)
    busy = EvalInput(one_file, 8, L, P, process_index=0, process_count=2)
    assert idle.files == [] and len(idle) == len(busy) == -(-RECORDS_PER_FILE[0] // 4)
    assert sum(b["example_mask"].sum() for b in idle) == 0
    assert sum(b["example_mask"].sum() for b in busy) == RECORDS_PER_FILE[0]
