"""A fixed English corpus shipped with the package: the first 2 MB of the embedded corpus
(`bert_jax.corpus.embedded`), written once and stored xz-compressed in
bert_jax/corpus/data/english.txt.xz, so that what a test learns from does not change with the
installed Python or packages. The embedded corpus is rebuilt from whatever is installed, and its
bytes move with every release: a learning margin measured on one machine need not hold on the
next. Tests that assert one read this text instead.

Source: `embedded.write_corpus(path, max_bytes=2_000_000)` under CPython 3.11.7 with numpy 2.4.6
(scipy 1.17.1, scikit-learn 1.9.1 and matplotlib 3.11.2 installed, but the first 2 MB end inside
numpy, so none of their text is here): 1245 documents, 24333 sentences, 1998073 bytes. Documents
1-1086 are the standard library's docstrings and the language reference topics of
`pydoc_data.topics` (Python Software Foundation License, Python's LICENSE.txt); documents
1087-1245 are numpy's docstrings (BSD-3-Clause, numpy's LICENSE.txt; its other licences in
`License-Expression` cover bundled third-party code, not these docstrings).

Same format and reading API as `embedded`: one sentence per line, a blank line between
documents; `iter_documents`, `write_corpus`.

    python -c "from bert_jax.corpus import snapshot as c; print(c.write_corpus('/tmp/c.txt'))"
"""

from __future__ import annotations

import functools
import hashlib
import lzma
import os
import pathlib
from collections.abc import Iterator

from bert_jax.corpus import embedded
from bert_jax.errors import BertJaxError

PATH = pathlib.Path(__file__).parent / "data" / "english.txt.xz"
SHA256 = "7e3c996de1e547bf671bce2f9ed5c6319f8a0086b22a4309c7f7aae9afee65b5"  # of the text
# What produced it (see the module docstring): embedded.package_versions() at the time.
SOURCE = {
    "python": "3.11.7",
    "numpy": "2.4.6",
    "scipy": "1.17.1",
    "scikit-learn": "1.9.1",
    "matplotlib": "3.11.2",
    "max_bytes": 2_000_000,
}
LICENSES = {"python": "PSF-2.0", "numpy": "BSD-3-Clause"}


@functools.cache
def text() -> str:
    """The whole snapshot, decompressed and checked against `SHA256`."""
    try:
        raw = lzma.decompress(PATH.read_bytes())
    except (OSError, lzma.LZMAError) as e:
        raise BertJaxError(f"the corpus snapshot {PATH} cannot be read: {e}") from e
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHA256:
        raise BertJaxError(
            f"the corpus snapshot {PATH} is not the one shipped: its text's sha256 is {digest}, "
            f"expected {SHA256}"
        )
    return raw.decode("utf-8")


@functools.cache
def _documents() -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(doc.split("\n")) for doc in text().strip("\n").split("\n\n"))


def iter_documents(max_documents: int | None = None, min_sentences: int = 2) -> Iterator[list[str]]:
    """Yields the snapshot's documents (lists of sentences) in order, as
    `embedded.iter_documents` yielded them when it was written. Every document has at least
    two sentences; `min_sentences` can ask for more."""
    count = 0
    for doc in _documents():
        if max_documents is not None and count >= max_documents:
            return
        if len(doc) < min_sentences:
            continue
        yield list(doc)
        count += 1
    if max_documents is not None and count < max_documents:
        raise BertJaxError(
            f"the corpus snapshot holds {count} documents of {min_sentences}+ sentences, "
            f"not {max_documents}"
        )


def write_corpus(
    path: str | os.PathLike, max_bytes: int | None = None, max_documents: int | None = None
) -> dict[str, int | float | str]:
    """Writes the snapshot (whole documents, at most `max_bytes` UTF-8 bytes) atomically, as
    `embedded.write_corpus` does; returns its stats: documents, sentences, bytes, megabytes,
    path. More than the snapshot holds is an error, not a shorter corpus."""
    if max_bytes is not None and max_bytes > SOURCE["max_bytes"]:
        raise BertJaxError(
            f"the corpus snapshot holds {SOURCE['max_bytes']} bytes at most, not {max_bytes}"
        )
    return embedded.write_documents(path, iter_documents(max_documents=max_documents), max_bytes)
