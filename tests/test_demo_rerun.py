"""`bert-jax demo` on an existing workdir: a changed flag rebuilds what it shapes (and everything
after it); unchanged settings reuse the artefacts. Checked on real artefacts of the demo's
pipeline (a sentencepiece-trained vocab and TFRecord shards of the embedded corpus)."""

from __future__ import annotations

import json

from bert_jax.corpus import embedded
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.runs.demo_workdir import SETTINGS_FILE, refresh_workdir
from bert_jax.tokenization import build_vocab


def _build(root, vocab_size: int) -> None:
    """The demo's stages 1-3 at a tiny size (its layout: data/corpus.txt, data/vocab, shards)."""
    data = root / "data"
    embedded.write_corpus(data / "corpus.txt", max_bytes=60_000)
    if not (data / "vocab" / "vocab.txt").exists():
        build_vocab([str(data / "corpus.txt")], vocab_size, data / "vocab")
    if not (data / "train" / "stats.json").exists():
        create_pretraining_data(str(data / "corpus.txt"), str(data / "train"),
                                str(data / "vocab" / "vocab.txt"), dupe_factor=1,
                                max_seq_length=64, max_predictions_per_seq=10)  # fmt: skip
    (root / "pretrain" / "checkpoints").mkdir(parents=True, exist_ok=True)


def _vocab_lines(root) -> int:
    return len((root / "data" / "vocab" / "vocab.txt").read_text().splitlines())


def test_changed_vocab_size_rebuilds_vocab_shards_and_pretraining(tmp_path):
    settings = {"corpus_mb": 0.05, "vocab_size": 400, "max_seq_length": 64, "train_steps": 2}
    assert refresh_workdir(tmp_path, settings) == ({}, [])  # a new workdir: nothing to rebuild
    _build(tmp_path, 400)
    assert _vocab_lines(tmp_path) == 400
    shards_before = (tmp_path / "data" / "train" / "stats.json").stat().st_mtime_ns

    assert refresh_workdir(tmp_path, settings) == ({}, [])  # same settings: all reused
    assert (tmp_path / "data" / "train" / "stats.json").stat().st_mtime_ns == shards_before

    changed, rebuilt = refresh_workdir(tmp_path, {**settings, "vocab_size": 600})
    assert changed == {"vocab_size": (400, 600)}
    assert rebuilt == ["vocab", "shards", "pretraining"]
    assert (tmp_path / "data" / "corpus.txt").exists()  # the corpus does not depend on it
    assert not (tmp_path / "data" / "vocab").exists() and not (tmp_path / "pretrain").exists()
    _build(tmp_path, 600)
    assert _vocab_lines(tmp_path) == 600  # the rerun's vocab has the new size
    record = json.loads((tmp_path / "data" / SETTINGS_FILE).read_text())
    assert record["vocab_size"] == 600

    changed, rebuilt = refresh_workdir(tmp_path, {**settings, "vocab_size": 600, "train_steps": 9})
    assert rebuilt == ["pretraining"] and (tmp_path / "data" / "vocab").exists()


def test_workdir_without_a_record_is_rebuilt(tmp_path):
    (tmp_path / "data" / "vocab").mkdir(parents=True)
    changed, rebuilt = refresh_workdir(tmp_path, {"vocab_size": 4000})
    assert rebuilt == ["vocab"] and changed == {"vocab_size": (None, 4000)}
