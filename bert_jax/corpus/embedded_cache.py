"""A disk cache of the embedded corpus's documents (bert_jax.corpus.embedded), so that each new
process (a CLI run, a pytest worker, a data worker) does not parse the installed sources again:
a full parse takes about 10 s of one core, reading the cache well under a second.

The key is everything the documents depend on: `embedded.py`'s own bytes, the Python version,
the packages read, and the path, size and mtime of every source file in reading order. Any change
is a miss, and the next full pass writes a new entry. Entries are JSON under
$BERT_JAX_CACHE_DIR (default $XDG_CACHE_HOME/bert_jax, else ~/.cache/bert_jax); an empty
BERT_JAX_CACHE_DIR turns the cache off. A cache that cannot be read or written is skipped, with
no error: it can make the corpus faster, never different.
"""

from __future__ import annotations

import json
import os
import pathlib

from bert_jax.atomic_write import write_bytes_atomic
from bert_jax.errors import BertJaxError

# Entries already read by this process, by key.
_loaded: dict[str, tuple[tuple[str, ...], ...]] = {}


def cache_dir() -> pathlib.Path | None:
    """Where entries live, or None when BERT_JAX_CACHE_DIR is set empty (cache off)."""
    configured = os.environ.get("BERT_JAX_CACHE_DIR")
    if configured is not None:
        return pathlib.Path(configured) if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base, "bert_jax")


def _entry(key: str) -> pathlib.Path | None:
    root = cache_dir()
    return None if root is None else root / f"embedded-corpus-{key}.json"


def load(key: str) -> tuple[tuple[str, ...], ...] | None:
    """The documents stored under `key`, or None (a miss, the cache off or unreadable)."""
    if key in _loaded:
        return _loaded[key]
    path = _entry(key)
    if path is None:
        return None
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        docs = tuple(tuple(doc) for doc in stored["documents"])
        if stored.get("key") != key or not all(isinstance(s, str) for d in docs for s in d):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    _loaded[key] = docs
    return docs


def save(key: str, docs: list[list[str]]) -> None:
    """Stores a complete pass's documents under `key` (atomically; skipped if it cannot)."""
    path = _entry(key)
    _loaded[key] = tuple(tuple(doc) for doc in docs)
    if path is None:
        return
    data = json.dumps({"key": key, "documents": docs}, ensure_ascii=False).encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
    except (OSError, BertJaxError):
        pass  # a read-only or full disk: the corpus is the same without the cache
