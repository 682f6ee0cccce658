"""Fast mode, Beam, objectives, masking and stats on real English text."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from bert_jax.data.instances import InstanceConfig, num_to_predict
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.shards.example import decode
from bert_jax.shards.tfrecord import read_records

CORPUS = pathlib.Path(__file__).parent / "fixtures" / "reference" / "corpus.txt"
CLS, SEP, MASK = 101, 102, 103


def _run(tmp, vocab, name, **kw) -> tuple[dict, list[dict]]:
    kw.setdefault("max_seq_length", 64)
    kw.setdefault("max_predictions_per_seq", 10)
    kw.setdefault("dupe_factor", 2)
    kw.setdefault("block_bytes", 6000)
    out = tmp / name
    stats = create_pretraining_data(kw.pop("inputs", str(CORPUS)), str(out), str(vocab), **kw)
    records = [decode(r) for p in sorted(out.glob("*.tfrecord")) for r in read_records(p)]
    return stats, records


def _shard_bytes(directory: pathlib.Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(directory.glob("*.tfrecord"))]


@pytest.fixture(scope="module")
def big(tmp_path_factory, uncased_vocab):
    """~0.3 MB of the embedded English corpus, static masks, default reference settings."""
    tmp = tmp_path_factory.mktemp("big")
    return _run(
        tmp, uncased_vocab, "big", inputs="embedded:250", max_seq_length=128,
        max_predictions_per_seq=20, dupe_factor=1, num_shards=2, block_bytes=1 << 16,
    )  # fmt: skip


def test_same_shards_for_1_and_2_workers_and_beam(tmp_path, uncased_vocab):
    _run(tmp_path, uncased_vocab, "w1", num_shards=3)
    _run(tmp_path, uncased_vocab, "w2", num_shards=3, num_workers=2)
    one = _shard_bytes(tmp_path / "w1")
    assert len(one) == 3 and all(one)
    assert one == _shard_bytes(tmp_path / "w2")
    other_seed = _run(tmp_path, uncased_vocab, "seed2", num_shards=3, seed=2)
    assert _shard_bytes(tmp_path / "seed2") != one and other_seed[0]["instances"] > 0
    pytest.importorskip("apache_beam")  # last: the checks above need no Beam
    _run(tmp_path, uncased_vocab, "beam", num_shards=3, runner="beam")
    assert one == _shard_bytes(tmp_path / "beam")
    assert (
        json.loads((tmp_path / "beam" / "stats.json").read_text())["instances"]
        == json.loads((tmp_path / "w1" / "stats.json").read_text())["instances"]
    )


def test_masks_follow_the_reference_rules(big):
    stats, records = big
    cfg = InstanceConfig(max_seq_length=128, max_predictions_per_seq=20)
    assert stats["instances"] == len(records) > 300
    for r in records:
        n = int(r["input_mask"].sum())
        k = int(r["masked_lm_weights"].sum())
        assert k == num_to_predict(n, cfg)  # no whole words: the budget is always filled
        pos = r["masked_lm_positions"][:k]
        assert np.all(np.diff(pos) > 0) and np.all(pos > 0) and np.all(pos < n)
        assert not np.isin(r["masked_lm_ids"][:k], [CLS, SEP, 0]).any()
        assert r["input_ids"][0] == CLS and r["input_ids"][n - 1] == SEP
    kinds = np.array([stats[f"{k}_count"] for k in ("mask_token", "random_token", "kept_token")])
    frac = kinds / kinds.sum()
    assert abs(frac[0] - 0.8) < 0.03 and abs(frac[1] - 0.1) < 0.02 and abs(frac[2] - 0.1) < 0.02
    assert 0.4 < stats["random_next_fraction"] < 0.65
    assert abs(stats["masked_fraction"] - 0.15) < 0.01
    hist = stats["length_histogram"]
    assert sum(hist["counts"]) == stats["instances"] and hist["bin_edges"][-1] == 128
    padding = 1 - sum(int(r["input_mask"].sum()) for r in records) / (128 * len(records))
    assert stats["padding_fraction"] == pytest.approx(padding)


def test_static_masks_undo_to_the_dynamic_instances(tmp_path, uncased_vocab):
    _, static = _run(tmp_path, uncased_vocab, "static", do_whole_word_mask=True)
    _, dynamic = _run(tmp_path, uncased_vocab, "dynamic", dynamic_masking=True)
    assert sorted(dynamic[0]) == sorted(
        ["input_ids", "input_mask", "segment_ids", "next_sentence_labels"]
    )
    assert len(static) == len(dynamic)
    for s, d in zip(static, dynamic, strict=True):
        k = int(s["masked_lm_weights"].sum())
        restored = s["input_ids"].copy()
        restored[s["masked_lm_positions"][:k]] = s["masked_lm_ids"][:k]
        np.testing.assert_array_equal(restored, d["input_ids"])
        np.testing.assert_array_equal(s["segment_ids"], d["segment_ids"])


def _corpus_token_stream(minilm_dir) -> str:
    """Token ids of every corpus line by transformers' BertTokenizer (not our tokenizer)."""
    from transformers import BertTokenizerFast

    tok = BertTokenizerFast.from_pretrained(str(minilm_dir))
    lines = [line.strip() for line in CORPUS.read_text().split("\n") if line.strip()]
    ids = [i for line in lines for i in tok(line, add_special_tokens=False)["input_ids"]]
    return " " + " ".join(map(str, ids)) + " "


def test_full_sentences_pack_real_tokens_contiguously(tmp_path, uncased_vocab, minilm_dir):
    stats, records = _run(
        tmp_path, uncased_vocab, "full", objective="full_sentences", dynamic_masking=True,
        dupe_factor=1,
    )  # fmt: skip
    stream = _corpus_token_stream(minilm_dir)
    total = 0
    for r in records:
        n = int(r["input_mask"].sum())
        ids = r["input_ids"][:n]
        assert ids[0] == CLS and ids[-1] == SEP and r["segment_ids"].sum() == 0
        assert r["next_sentence_labels"][0] == 0
        for piece in np.split(ids[1:-1], np.flatnonzero(ids[1:-1] == SEP)):
            piece = piece[piece != SEP]
            total += len(piece)
            assert " " + " ".join(map(str, piece)) + " " in stream
    assert total == len(stream.split())  # every token exactly once (dupe_factor=1)
    assert stats["padding_fraction"] < 0.2


def test_sop_negatives_are_swapped_continuations(tmp_path, uncased_vocab, minilm_dir):
    stats, records = _run(
        tmp_path, uncased_vocab, "sop", objective="sop", dynamic_masking=True, dupe_factor=5,
        short_seq_prob=0.5,
    )  # fmt: skip
    stream = _corpus_token_stream(minilm_dir)
    text = lambda ids: " " + " ".join(map(str, ids)) + " "
    swapped = in_order = positives = negatives = random_b = 0
    for r in records:
        n = int(r["input_mask"].sum())
        if n == 64:
            continue  # may have been truncated
        ids, seg = r["input_ids"][:n], r["segment_ids"][:n]
        a, b = ids[1 : int((seg == 0).sum()) - 1], ids[int((seg == 0).sum()) : n - 1]
        if r["next_sentence_labels"][0] == 0:
            positives += 1
            in_order += text(np.concatenate([a, b])) in stream
        else:
            negatives += 1
            if text(np.concatenate([b, a])) in stream:
                swapped += 1
            elif text(a) in stream and text(b) in stream:
                random_b += 1  # ALBERT: a one-sentence chunk takes B from another document
    assert positives > 20 and swapped > 20 and random_b > 0
    assert in_order == positives  # label 0: A then B, as in the text
    assert swapped + random_b == negatives
    assert 0.4 < stats["swapped_order_fraction"] < 0.8
