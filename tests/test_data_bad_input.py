"""Bad input: each case is a clear error or the documented handling."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.errors import BertJaxError
from bert_jax.shards.example import decode
from bert_jax.shards.tfrecord import read_records

SENTENCES = [
    "The rain had only ceased with the gray streaks of morning at Blazing Star.",
    "The settlement awoke to a moral sense of cleanliness.",
    "Forgotten knives and tin cups lay where the showers had washed the dust away.",
    "Possibly this may have been the reason why early risers adopted a thoughtful habit.",
]


def _records(out) -> list[dict]:
    return [decode(r) for p in sorted(out.glob("*.tfrecord")) for r in read_records(p)]


def _make(tmp_path, vocab, inputs, **kw):
    out = tmp_path / "out"
    kw = {"max_seq_length": 32, "max_predictions_per_seq": 5, "dupe_factor": 2, **kw}
    stats = create_pretraining_data(inputs, str(out), str(vocab), **kw)
    return stats, _records(out)


def test_invalid_utf8_is_replaced_and_counted(tmp_path, uncased_vocab):
    path = tmp_path / "latin1.txt"
    text = "\n".join(SENTENCES).encode() + b"\nCaf\xe9 au lait and cr\xe8me br\xfbl\xe9e.\n"
    path.write_bytes(text)
    for compat in (False, True):
        stats, records = _make(tmp_path, uncased_vocab, str(path), reference_compat=compat)
        assert stats["invalid_utf8_lines"] == 1 and stats["instances"] == len(records) > 0


def test_empty_files_alone_are_refused_and_among_others_skipped(tmp_path, uncased_vocab):
    """Only empty or blank files: refused before any output (empty shards, which training then
    refuses, would have replaced an earlier run's). Beside real text they are skipped."""
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "blank.txt").write_text("\n\n  \n")
    with pytest.raises(BertJaxError, match=r"\.txt: no text \(empty, or blank lines only\)$"):
        _make(tmp_path, uncased_vocab, str(tmp_path / "*.txt"), num_shards=2)
    assert not (tmp_path / "out").exists()
    (tmp_path / "real.txt").write_text("\n".join(SENTENCES))
    stats, records = _make(tmp_path, uncased_vocab, str(tmp_path / "*.txt"))
    assert stats["documents"] == 1 and len(records) > 0


def test_single_sentence_documents_always_take_a_random_next(tmp_path, uncased_vocab):
    """As the reference: a one-sentence chunk has no continuation, so its label is 1."""
    path = tmp_path / "one_each.txt"
    path.write_text("\n\n".join(SENTENCES) + "\n")
    for compat in (False, True):
        stats, records = _make(tmp_path, uncased_vocab, str(path), reference_compat=compat)
        assert stats["documents"] == 4 and len(records) == 8
        assert all(r["next_sentence_labels"][0] == 1 for r in records)


def test_over_long_lines_are_split_and_instances_stay_in_bounds(tmp_path, uncased_vocab):
    path = tmp_path / "long.txt"
    path.write_text(" ".join(SENTENCES * 200) + "\n" + SENTENCES[0] + "\n")
    stats, records = _make(tmp_path, uncased_vocab, str(path), max_line_chars=2000)
    assert stats["long_lines_split"] == 1 and stats["sentences"] > 20
    assert all(r["input_ids"].shape == (32,) for r in records)


def test_vocab_without_special_tokens_is_an_error(tmp_path, uncased_vocab):
    vocab = tmp_path / "vocab.txt"
    lines = uncased_vocab.read_text().splitlines()
    vocab.write_text("\n".join(t for t in lines if t != "[MASK]") + "\n")
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES))
    with pytest.raises(BertJaxError, match=r"vocab\.txt.*\[MASK\]"):
        create_pretraining_data(str(corpus), str(tmp_path / "out"), str(vocab))
    assert not list((tmp_path / "out").glob("*.tfrecord"))


def test_unwritable_output_is_an_error_and_leaves_no_shard(tmp_path, uncased_vocab):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES))
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(BertJaxError, match="a_file"):
        create_pretraining_data(str(corpus), str(blocker / "out"), str(uncased_vocab))
    with pytest.raises(BertJaxError, match="no file matches"):
        create_pretraining_data(str(tmp_path / "nope*.txt"), str(tmp_path), str(uncased_vocab))


def test_too_few_predictions_are_capped_and_counted(tmp_path, uncased_vocab):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES * 3))
    stats, records = _make(
        tmp_path, uncased_vocab, str(corpus), max_seq_length=64, max_predictions_per_seq=2
    )
    assert stats["capped_instances"] > 0
    assert all(r["masked_lm_weights"].sum() <= 2 for r in records)
    assert any(r["masked_lm_weights"].sum() == 2 for r in records)
    with pytest.raises(BertJaxError, match="max_predictions_per_seq=0"):
        _make(tmp_path, uncased_vocab, str(corpus), max_predictions_per_seq=0)


def test_cli_reports_one_line_error(tmp_path, uncased_vocab):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES))
    run = subprocess.run(
        [sys.executable, "-m", "bert_jax.cli", "create-pretraining-data",
         f"--input_file={corpus}", f"--output_dir={tmp_path / 'o'}",
         f"--vocab_file={tmp_path / 'missing.txt'}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1].startswith("bert-jax: error: ")
    assert "missing.txt" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "o" / "stats.json").exists()


def test_interrupted_run_leaves_no_final_shards(tmp_path, uncased_vocab, monkeypatch):
    from bert_jax.data import pipeline

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n\n".join("\n".join(SENTENCES) for _ in range(20)))
    calls = {"n": 0}
    real = pipeline.process_block

    def failing(*args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(pipeline, "process_block", failing)
    with pytest.raises(KeyboardInterrupt):
        create_pretraining_data(
            str(corpus), str(tmp_path / "o"), str(uncased_vocab), block_bytes=500, num_shards=2
        )
    assert calls["n"] == 3
    assert list((tmp_path / "o").iterdir()) == []
