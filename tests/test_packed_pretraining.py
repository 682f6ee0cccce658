"""Pretraining on packed rows (create-pretraining-data --pack_sequences): the packed shards hold
exactly the unpacked run's instances (read back with TensorFlow's parser), a packed batch's
loss and metrics equal those of the same instances one per row (BERT with NSP, ModernBERT), and
`bert-jax pretrain` trains and evaluates on packed shards, reading S from their stats.json."""

from __future__ import annotations

import collections
import json
import pathlib

import numpy as np
import pytest

from bert_jax import objectives
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.errors import BertJaxError

SEQ, PRED, SLOTS = 64, 10, 4


def _write(tmp: pathlib.Path, vocab, name: str, pack: int, **kw) -> pathlib.Path:
    out = tmp / name
    create_pretraining_data("embedded:120", str(out), str(vocab), max_seq_length=SEQ,
                            max_predictions_per_seq=PRED, dupe_factor=1, pack_sequences=pack,
                            **kw)  # fmt: skip
    return out


def _tf_records(folder: pathlib.Path, objective: str, pack: int, static: bool) -> dict:
    """Every record of the folder's shards, parsed by TensorFlow with the objective's schema."""
    tf = pytest.importorskip("tensorflow")
    schema = objectives.get(objective).shard_schema(SEQ, PRED, static, pack)
    spec = {f.name: tf.io.FixedLenFeature([f.length], getattr(tf, f.dtype)) for f in schema}
    files = sorted(str(p) for p in folder.glob("shard-*.tfrecord"))
    rows = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(files)]
    return {f.name: np.stack([r[f.name].numpy() for r in rows]) for f in schema}


def _instances(records: dict) -> list[tuple]:
    """(ids, segment ids, label) of every instance, packed rows split at their pack ids."""
    out = []
    for r in range(len(records["input_ids"])):
        pack_L = records.get("pack_ids", records["input_mask"])[r]
        for slot in range(records["next_sentence_labels"].shape[1]):
            at = np.flatnonzero(pack_L == slot + 1)
            if at.size:
                assert (np.diff(at) == 1).all()  # contiguous
                out.append((tuple(records["input_ids"][r, at]),
                            tuple(records["segment_ids"][r, at]),
                            int(records["next_sentence_labels"][r, slot])))  # fmt: skip
            else:
                assert records["next_sentence_labels"][r, slot] == 0
    return out


def test_packed_shards_hold_the_unpacked_instances(tmp_path, uncased_vocab):
    plain = _write(tmp_path, uncased_vocab, "plain", 1, dynamic_masking=True)
    packed = _write(tmp_path, uncased_vocab, "packed", SLOTS, dynamic_masking=True)
    ours = _tf_records(packed, "mlm_nsp", SLOTS, static=False)
    reference = _tf_records(plain, "mlm_nsp", 1, static=False)
    np.testing.assert_array_equal(ours["input_mask"], ours["pack_ids"] > 0)
    assert (np.diff(ours["input_mask"], axis=1) <= 0).all()  # rows filled from slot 0
    assert collections.Counter(_instances(ours)) == collections.Counter(_instances(reference))
    # Best-fit decreasing leaves little room: fewer records and less padding.
    stats = [json.loads((d / "stats.json").read_text()) for d in (plain, packed)]
    assert stats[1]["records"] == len(ours["input_ids"]) < stats[0]["records"]
    assert stats[1]["instances"] == stats[0]["instances"]
    assert stats[1]["padding_fraction"] < 0.05 < stats[0]["padding_fraction"]


def test_static_masks_of_packed_rows(tmp_path, uncased_vocab):
    packed = _write(tmp_path, uncased_vocab, "static", SLOTS)
    rec = _tf_records(packed, "mlm_nsp", SLOTS, static=True)
    weights_RxP = rec["masked_lm_weights"] > 0
    rows, slots = np.nonzero(weights_RxP)
    at = rec["masked_lm_positions"][rows, slots]
    assert (rec["input_mask"][rows, at] == 1).all()  # inside the row's real tokens
    cls_sep = {101, 102}
    assert not any(int(t) in cls_sep for t in rec["masked_lm_ids"][rows, slots])
    # About 15% of every row's real tokens, as unpacked rows are masked.
    assert abs(weights_RxP.sum() / rec["input_mask"].sum() - 0.15) < 0.01


@pytest.fixture(scope="module")
def static_shards(tmp_path_factory, uncased_vocab) -> dict[str, pathlib.Path]:
    tmp = tmp_path_factory.mktemp("packed_static")
    return {
        "mlm_nsp": _write(tmp, uncased_vocab, "nsp", SLOTS),
        "modernbert": _write(tmp, uncased_vocab, "mb", SLOTS, objective="modernbert",
                             masked_lm_prob=0.3),
    }  # fmt: skip


def _unpack(batch: dict) -> dict:
    """The packed batch's instances one per row: positions shifted to each instance's start."""
    out = collections.defaultdict(list)
    for r in range(len(batch["input_ids"])):
        for slot in range(SLOTS):
            at = np.flatnonzero(batch["pack_ids"][r] == slot + 1)
            if not at.size:
                continue
            start, n = int(at[0]), len(at)
            for key in ("input_ids", "input_mask", "segment_ids"):
                row = np.zeros(SEQ, np.int32)
                row[:n] = batch[key][r, at]
                out[key].append(row)
            mine = (batch["masked_lm_weights"][r] > 0) & (
                (batch["masked_lm_positions"][r] >= start)
                & (batch["masked_lm_positions"][r] < start + n)
            )
            take = np.flatnonzero(mine)
            for key, shift in (("masked_lm_positions", start), ("masked_lm_ids", 0)):
                row = np.zeros(PRED, np.int32)
                row[: take.size] = batch[key][r, take] - shift
                out[key].append(row)
            out["masked_lm_weights"].append((np.arange(PRED) < take.size).astype(np.float32))
            if "next_sentence_labels" in batch:
                out["next_sentence_labels"].append(batch["next_sentence_labels"][r, slot])
    arrays = {k: np.stack(v) for k, v in out.items()}
    arrays["example_mask"] = np.ones(len(arrays["input_ids"]), np.float32)
    return arrays


@pytest.mark.parametrize("objective", ["mlm_nsp", "modernbert"])
def test_packed_batch_loss_equals_one_instance_per_row(static_shards, uncased_vocab, objective):
    import jax

    from bert_jax.config import preset
    from bert_jax.input import PretrainInput
    from bert_jax.pretraining.task import PretrainingTask

    config = preset("L2-H128-A2", vocab_size=30522, dtype="float32")
    files = str(static_shards[objective] / "shard-*.tfrecord")
    packed_task = PretrainingTask(config, 8, SEQ, PRED, objective=objective,
                                  pack_sequences=SLOTS)  # fmt: skip
    batch = next(PretrainInput(files, 8, SEQ, PRED, shuffle=False, objective=objective,
                               pack_sequences=SLOTS, prefetch=0))  # fmt: skip
    batch = {k: np.asarray(v) for k, v in batch.items()}
    plain = _unpack(batch)
    assert len(plain["input_ids"]) > 8  # several instances share rows
    plain_task = PretrainingTask(config, len(plain["input_ids"]), SEQ, PRED, objective=objective)
    params = jax.jit(plain_task.model.init)(jax.random.PRNGKey(0), **plain_task.model_inputs(
        {k: plain[k] for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")}
    ))["params"]  # fmt: skip
    key = jax.random.PRNGKey(1)
    loss_packed, m_packed = packed_task.loss_fn(params, batch, key, deterministic=True)
    loss_plain, m_plain = plain_task.loss_fn(params, plain, key, deterministic=True)
    assert set(m_packed) == set(m_plain)
    for name in m_plain:
        np.testing.assert_allclose(m_packed[name], m_plain[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)  # fmt: skip
    np.testing.assert_allclose(loss_packed, loss_plain, rtol=1e-5)


@pytest.mark.slow  # a 20-step pretraining run with evaluation (~25 s)
def test_pretrain_on_packed_shards(tmp_path, uncased_vocab):
    from bert_jax.runs.pretrain import run_pretraining
    from bert_jax.train.config import pretrain_config

    shards = _write(tmp_path, uncased_vocab, "train", SLOTS)
    c = pretrain_config("L2-H128-A2")
    c.update(dict(
        dtype="float32", train_files=str(shards / "shard-*.tfrecord"),
        eval_files=str(shards / "shard-*.tfrecord"), vocab_file=str(uncased_vocab),
        max_seq_length=SEQ, max_predictions_per_seq=PRED, global_batch_size=16,
        learning_rate=1e-3, schedule="constant", warmup_steps=0, train_steps=20,
        eval_every_steps=20, checkpoint_every_steps=20, max_eval_steps=3, log_every_steps=10,
    ))  # fmt: skip
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 1, 1
    result = run_pretraining(c, str(tmp_path / "workdir"))  # pack_sequences: the shards' 4
    assert result.trainer.task.pack_sequences == SLOTS
    records = [json.loads(line)
               for line in (tmp_path / "workdir" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    assert len(losses) == 2 and np.isfinite(losses).all() and losses[1] < losses[0]
    assert 0.0 <= result.last_eval["eval_next_sentence_accuracy"] <= 1.0
    c.pack_sequences = 1  # the shards say 4: refused naming both fixes
    with pytest.raises(BertJaxError, match=r"pack_sequences=4 .*--config.pack_sequences=4"):
        run_pretraining(c, str(tmp_path / "other"))


def test_packing_refused_where_the_model_reads_no_packed_rows(tmp_path, uncased_vocab):
    with pytest.raises(BertJaxError, match=r"--pack_sequences=4: objective ltr does not train"):
        _write(tmp_path, uncased_vocab, "ltr", SLOTS, objective="ltr")
    with pytest.raises(BertJaxError, match=r"--pack_sequences=0: must be >= 1"):
        _write(tmp_path, uncased_vocab, "zero", 0)
    # Before: 100000 slots at 64 tokens wrote a 322 MB shard of empty slots, with no warning.
    too_many = r"--pack_sequences=100000: a row of --max_seq_length=64 tokens holds at most 21 "
    with pytest.raises(BertJaxError, match=too_many):
        _write(tmp_path, uncased_vocab, "huge", 100000)
    assert not (tmp_path / "huge").exists()  # refused before anything is written
    with pytest.raises(BertJaxError, match=r"pack_sequences=4: objective electra does not train "
                                           r"on packed rows \(packable: mlm_nsp, "):  # fmt: skip
        from bert_jax.config import preset
        from bert_jax.pretraining.task import PretrainingTask

        PretrainingTask(preset("L2-H128-A2"), 8, SEQ, PRED, objective="electra", pack_sequences=4)
    with pytest.raises(BertJaxError, match=r"--reference_compat writes one instance per record"):
        _write(tmp_path, uncased_vocab, "ref", SLOTS, reference_compat=True)


def test_packed_and_unpacked_shards_mixed_are_named(static_shards, tmp_path, uncased_vocab):
    """Before: "record 0: feature 'next_sentence_labels' has length 4, expected 1", which does not
    say that the files mix packed and unpacked shards."""
    from bert_jax.input.batches import check_files

    unpacked = next(_write(tmp_path, uncased_vocab, "one", 1).glob("shard-*.tfrecord"))
    packed = next(static_shards["mlm_nsp"].glob("shard-*.tfrecord"))
    mlm_nsp = objectives.get("mlm_nsp")
    for files, pack in (([unpacked, packed], 1), ([packed, unpacked], SLOTS)):
        want = (rf"^the files mix packed and unpacked shards: {packed} \(pack_sequences={SLOTS}\) "
                rf"and {unpacked} \(unpacked\); ")  # fmt: skip
        with pytest.raises(BertJaxError, match=want):
            check_files([str(f) for f in files], mlm_nsp.shard_schema(SEQ, PRED, True, pack), False)
