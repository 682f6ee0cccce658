"""The corpus snapshot (bert_jax.corpus.snapshot): a fixed English text shipped with the package,
checked by its sha256, read through the embedded corpus's API; the learning tests read it."""

from __future__ import annotations

import lzma

import pytest

from bert_jax.corpus import snapshot
from bert_jax.errors import BertJaxError


def test_snapshot_is_the_recorded_text_in_the_embedded_format(tmp_path):
    docs = list(snapshot.iter_documents())
    assert len(docs) == 1245 and sum(map(len, docs)) == 24333
    assert all(len(d) >= 2 and all(s and "\n" not in s for s in d) for d in docs)
    assert list(snapshot.iter_documents(max_documents=3)) == docs[:3]
    assert [d for d in docs if len(d) >= 6][:4] == list(
        snapshot.iter_documents(max_documents=4, min_sentences=6)
    )
    stats = snapshot.write_corpus(tmp_path / "c.txt", max_bytes=300_000)
    text = (tmp_path / "c.txt").read_text()
    assert len(text.encode()) == stats["bytes"] <= 300_000 < stats["bytes"] + 20_000
    assert text.split("\n\n") == ["\n".join(d) + "\n" * (i == stats["documents"] - 1)
                                  for i, d in enumerate(docs[: stats["documents"]])]  # fmt: skip
    whole = snapshot.write_corpus(tmp_path / "all.txt")
    assert whole["bytes"] == len(snapshot.text().encode()) == 1_998_073


def test_more_than_it_holds_is_an_error(tmp_path):
    with pytest.raises(BertJaxError, match="2000000 bytes at most"):
        snapshot.write_corpus(tmp_path / "c.txt", max_bytes=3_000_000)
    with pytest.raises(BertJaxError, match="holds 1245 documents"):
        list(snapshot.iter_documents(max_documents=1246))


def test_a_changed_snapshot_is_refused_naming_the_file(tmp_path, monkeypatch):
    changed = tmp_path / "english.txt.xz"
    changed.write_bytes(lzma.compress(snapshot.text().replace("Return", "Give").encode()))
    monkeypatch.setattr(snapshot, "PATH", changed)
    snapshot.text.cache_clear()
    try:
        with pytest.raises(BertJaxError, match=f"{changed}.*sha256"):
            snapshot.text()
        changed.write_bytes(b"not xz")
        with pytest.raises(BertJaxError, match=f"{changed} cannot be read"):
            snapshot.text()
    finally:
        snapshot.text.cache_clear()
