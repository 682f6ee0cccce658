"""The embedded corpus: real English in the reference's input format, deterministic, built without
importing (running) any module it reads."""

from __future__ import annotations

import collections
import json
import os
import re
import sys

import pytest

from bert_jax.corpus import embedded as embedded_corpus
from bert_jax.corpus import embedded_cache
from bert_jax.errors import BertJaxError
from bert_jax.tokenization import load_vocab

MAX_BYTES = 300_000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    stats = embedded_corpus.write_corpus(path, max_bytes=MAX_BYTES)
    return path, stats


def test_reference_input_format(corpus):
    path, stats = corpus
    data = path.read_bytes()
    assert stats["bytes"] == len(data) and MAX_BYTES * 0.9 < len(data) <= MAX_BYTES
    text = data.decode("utf-8")
    assert text.endswith("\n") and not text.endswith("\n\n") and "\n\n\n" not in text
    documents = [d.split("\n") for d in text[:-1].split("\n\n")]
    assert len(documents) == stats["documents"]
    assert sum(map(len, documents)) == stats["sentences"]
    for doc in documents:
        assert len(doc) >= 2
        for sentence in doc:
            assert sentence == sentence.strip() and len(sentence.split()) >= 3, sentence
            assert not sentence.startswith((">>>", "...", ".. ")), sentence
            assert not re.fullmatch(r"[-=~^]{3,}", sentence)


def test_is_real_english(corpus, uncased_vocab):
    path, _ = corpus
    vocab = load_vocab(uncased_vocab)
    words = re.findall(r"[A-Za-z]+", path.read_text(encoding="utf-8"))
    assert len(words) > 40_000
    # Most words are whole words of BERT's English vocab; frequent English words dominate.
    in_vocab = sum(w.lower() in vocab for w in words) / len(words)
    assert in_vocab > 0.85, in_vocab
    top = {w for w, _ in collections.Counter(w.lower() for w in words).most_common(12)}
    assert {"the", "is", "of", "a", "to"} <= top, top


def test_deterministic_and_imports_nothing(corpus, tmp_path, monkeypatch):
    path, _ = corpus
    before = set(sys.modules)
    # parsed afresh, then replayed from the per-process memo of each file's documents
    monkeypatch.setenv("BERT_JAX_CACHE_DIR", "")  # not from the disk cache
    monkeypatch.setattr(embedded_cache, "_loaded", {})
    embedded_corpus._file_documents.cache_clear()
    embedded_corpus._topic_texts.cache_clear()
    for name in ("again.txt", "replayed.txt"):
        embedded_corpus.write_corpus(tmp_path / name, max_bytes=MAX_BYTES)
        assert (tmp_path / name).read_bytes() == path.read_bytes(), name
    assert not {"antigravity", "this", "turtle", "tkinter", "idlelib"} & (set(sys.modules) - before)
    docs = list(embedded_corpus.iter_documents(max_documents=3))
    assert len(docs) == 3 and docs[0][0] == "Record of phased-in incompatible language changes."


def test_a_complete_pass_is_kept_on_disk_for_later_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_JAX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(embedded_cache, "_loaded", {})
    first = list(embedded_corpus.iter_documents(max_documents=5, packages=()))
    assert not (tmp_path / "cache").exists()  # a partial pass stores nothing
    parsed = list(embedded_corpus.iter_documents(min_sentences=0, packages=()))
    assert parsed[:5] != first and [d for d in parsed if len(d) >= 2][:5] == first
    (entry,) = (tmp_path / "cache").glob("embedded-corpus-*.json")
    # A later process: nothing in memory, and it reads the entry instead of parsing.
    monkeypatch.setattr(embedded_cache, "_loaded", {})
    parse = embedded_corpus._parsed_documents

    def no_parsing(files):
        raise AssertionError("parsed the sources instead of reading the cache")

    monkeypatch.setattr(embedded_corpus, "_parsed_documents", no_parsing)
    assert list(embedded_corpus.iter_documents(min_sentences=0, packages=())) == parsed
    assert list(embedded_corpus.iter_documents(max_documents=5, packages=())) == first
    # A damaged entry is a miss and is written again, never a different corpus.
    monkeypatch.setattr(embedded_corpus, "_parsed_documents", parse)
    monkeypatch.setattr(embedded_cache, "_loaded", {})
    entry.write_text('{"key": "', encoding="utf-8")
    assert list(embedded_corpus.iter_documents(min_sentences=0, packages=())) == parsed
    assert len(json.loads(entry.read_text(encoding="utf-8"))["documents"]) == len(parsed)
    # Off when set empty: nothing is written.
    monkeypatch.setenv("BERT_JAX_CACHE_DIR", "")
    assert embedded_cache.cache_dir() is None


def test_the_cache_key_follows_every_source_file(tmp_path):
    files = [tmp_path / "a.py", tmp_path / "b.py"]
    for f in files:
        f.write_text('"""A module."""\n')
    key = embedded_corpus._cache_key(files, ())
    assert embedded_corpus._cache_key(files, ()) == key
    assert embedded_corpus._cache_key(files, ("numpy",)) != key
    assert embedded_corpus._cache_key(files[:1], ()) != key
    os.utime(files[1], ns=(1, 1))
    assert embedded_corpus._cache_key(files, ()) != key


def test_docstring_cleaning():
    doc = """Summary line of the function.

    A longer explanation, e.g. with an abbreviation. It spans
    two lines! Does it end here? Yes.

    Parameters
    ----------
    x : array_like
        The input values to transform.

    Example::

        result = transform(x)  # code, dropped

    >>> transform([1, 2])
    [2, 4]

    - first bullet point in a list
    - second bullet point in a list
    """
    assert embedded_corpus.docstring_sentences(doc) == [
        "Summary line of the function.",
        "A longer explanation, e.g. with an abbreviation.",
        "It spans two lines!",
        "Does it end here?",
        "The input values to transform.",
        "first bullet point in a list",
        "second bullet point in a list",
    ]


def test_unwritable_path_is_a_clear_error(tmp_path):
    with pytest.raises(BertJaxError, match=r"missing-dir/c\.txt: cannot write"):
        embedded_corpus.write_corpus(tmp_path / "missing-dir" / "c.txt", max_bytes=1000)
    assert not list(tmp_path.iterdir())
