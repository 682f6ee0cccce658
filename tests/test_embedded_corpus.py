"""The embedded corpus: real English in the reference's input format, deterministic, built without
importing (running) any module it reads."""

from __future__ import annotations

import collections
import re
import sys

import pytest

from bert_jax.corpus import embedded as embedded_corpus
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


def test_deterministic_and_imports_nothing(corpus, tmp_path):
    path, _ = corpus
    before = set(sys.modules)
    # parsed afresh, then replayed from the per-process memo of each file's documents
    embedded_corpus._file_documents.cache_clear()
    embedded_corpus._topic_texts.cache_clear()
    for name in ("again.txt", "replayed.txt"):
        embedded_corpus.write_corpus(tmp_path / name, max_bytes=MAX_BYTES)
        assert (tmp_path / name).read_bytes() == path.read_bytes(), name
    assert not {"antigravity", "this", "turtle", "tkinter", "idlelib"} & (set(sys.modules) - before)
    docs = list(embedded_corpus.iter_documents(max_documents=3))
    assert len(docs) == 3 and docs[0][0] == "Record of phased-in incompatible language changes."


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
