"""An English corpus that needs no download: the docstrings of the Python standard library and
of numpy, scipy, scikit-learn and matplotlib where installed.

Source files are parsed with `ast` (nothing is imported, so no module runs), in sorted order, so
the output depends only on the versions of Python and those packages; create-pretraining-data
records the text's sha256 and the versions in stats.json (`embedded_corpus`). One document per
module (its docstring and those of its top-level functions) and per class (its docstring and its
methods'), plus one per topic of `pydoc_data.topics` (the language reference's prose). Doctest
and code lines are dropped, reST markup is reduced to its text, paragraphs are split into
sentences.

Output format, as google-research/bert's create_pretraining_data reads it: one sentence per
line, a blank line between documents.

    python -c "from bert_jax.corpus import embedded as c; print(c.write_corpus('/tmp/c.txt'))"
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import inspect
import os
import pathlib
import platform
import re
import sysconfig
from collections.abc import Iterator

from bert_jax.atomic_write import open_atomic
from bert_jax.corpus import embedded_cache

# Test suites, GUI/demo code and files that are code rather than prose.
_SKIP_DIRS = {
    "site-packages",
    "dist-packages",
    "test",
    "tests",
    "idle_test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "lib2to3",
    "ensurepip",
    "__pycache__",
    "pydoc_data",
    "testing",
    "_vendor",
    "externals",
}
# Installed dependencies of bert-jax whose docstrings extend the corpus to several MB.
DEFAULT_PACKAGES = ("numpy", "scipy", "sklearn", "matplotlib")
_SKIP_FILES = {"antigravity.py", "this.py", "turtle.py", "__main__.py", "__phello__.foo.py"}

_ABBREVIATIONS = {"e.g.", "i.e.", "etc.", "vs.", "cf.", "mr.", "mrs.", "dr.", "no.", "approx."}
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_BULLET = re.compile(r"^\s*([-*+\u2022]|\d+[.)]|\(\w\))\s+")
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`]+)`")
_CODE_LINE = re.compile(r"\s*(def \w+\(|class \w+[(:]|import [\w.]+$|from [\w.]+ import )")
_DOUBLE_BACKTICK = re.compile(r"``([^`]+)``")
# numpydoc parameter lines such as "x : array_like" or "axis : int, optional".
_DECLARATION = re.compile(r"^\*{0,2}[\w.]+(, \*{0,2}[\w.]+)* : ")


def stdlib_dir() -> pathlib.Path:
    return pathlib.Path(sysconfig.get_paths()["stdlib"])


def _source_files(root: pathlib.Path) -> list[pathlib.Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        if pathlib.Path(dirpath).name.startswith("config-"):
            continue
        files += [
            pathlib.Path(dirpath, f)
            for f in sorted(filenames)
            if f.endswith(".py") and f not in _SKIP_FILES
        ]
    return sorted(files)


def _is_prose(line: str) -> bool:
    if line.lstrip().startswith(("|", "+-", "+=")) or _CODE_LINE.match(line):
        return False  # tables and code
    letters = sum(c.isalpha() for c in line)
    return letters >= 0.6 * len(line.replace(" ", "")) and " " in line.strip()


def split_sentences(text: str) -> list[str]:
    """Splits prose at . ! ? followed by a capital letter, digit or quote, not after e.g./i.e."""
    pieces = _SENTENCE_END.split(text)
    out: list[str] = []
    for piece in pieces:
        piece = piece.strip()
        if not piece:
            continue
        last = out[-1].rsplit(" ", 1)[-1].lower() if out else ""
        if out and (last in _ABBREVIATIONS or re.fullmatch(r"[a-z]\.", last)):
            out[-1] += " " + piece
        else:
            out.append(piece)
    return out


def _is_underline(line: str) -> bool:
    return len(line) >= 3 and len(set(line)) == 1 and line[0] in "-=~^*#"


def docstring_sentences(doc: str) -> list[str]:
    """A docstring -> its English sentences, without doctests, code, section headers, parameter
    declarations or markup."""
    lines = inspect.cleandoc(doc).splitlines()
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line.rstrip())
        elif paragraphs[-1]:
            paragraphs.append([])
    chunks: list[str] = []
    in_literal = False
    for para in paragraphs:
        if not para:
            continue
        if in_literal and para[0][:1].isspace():
            continue  # the indented block after "::" is code
        in_literal = para[-1].endswith("::")
        current: list[str] = []
        for i, line in enumerate(para):
            text = line.strip()
            next_text = para[i + 1].strip() if i + 1 < len(para) else ""
            skip = (
                _is_underline(text)
                or _is_underline(next_text)
                or text.startswith((">>>", "...", "$ ", ".. "))
                or _DECLARATION.match(text) is not None
                or not _is_prose(text)
            )
            if skip or _BULLET.match(text):
                if current:
                    chunks.append(" ".join(current))
                current = [] if skip else [_BULLET.sub("", text)]
            else:
                current.append(text)
        if current:
            chunks.append(" ".join(current))
    sentences: list[str] = []
    for chunk in chunks:
        chunk = _DOUBLE_BACKTICK.sub(r"\1", _ROLE.sub(r"\1", chunk)).replace("::", ":")
        sentences += [s for s in split_sentences(chunk) if len(s.split()) >= 3]
    return sentences


def _classes(statements: list[ast.stmt]) -> Iterator[ast.ClassDef]:
    """Class definitions at any depth, visiting statements only (ast.walk would also visit every
    expression node, which is most of the parsing cost)."""
    for node in statements:
        if isinstance(node, ast.ClassDef):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            children = getattr(node, field, None)
            if isinstance(children, list):
                yield from _classes(children)
        for case in getattr(node, "cases", ()):
            yield from _classes(case.body)


def _parse(path: pathlib.Path, attempts: int = 3) -> ast.Module | None:
    """The module's syntax tree, or None for a file that is not Python we can read. CPython 3.11
    keeps one AST recursion counter per interpreter; a traceback formatted by another thread
    meanwhile (it parses too) makes a correct parse fail with "AST constructor recursion depth
    mismatch" (python/cpython#106905). That error is transient, so the parse is retried."""
    for attempt in range(attempts):
        try:
            return ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError, OSError):
            return None
        except SystemError as e:
            if "recursion depth mismatch" not in str(e) or attempt == attempts - 1:
                raise
    return None


# A document as (docstring, its sentences) pairs, before de-duplication against the rest of the
# corpus. Parsing is most of the corpus's cost and a run (or the test suite) reads it more than
# once, so each file's documents are kept for the process, keyed by its size and mtime; a
# complete pass is also kept on disk for later processes (bert_jax.corpus.embedded_cache).
_Document = tuple[tuple[str, tuple[str, ...]], ...]


def _stamp(path: pathlib.Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


@functools.cache
def _file_documents(path: pathlib.Path, stamp: tuple[int, int]) -> tuple[_Document, ...]:
    tree = _parse(path)
    if tree is None:
        return ()

    def document(nodes: list[ast.AST]) -> _Document:
        docs = (ast.get_docstring(node, clean=False) for node in nodes)  # type: ignore[arg-type]
        return tuple((doc, tuple(docstring_sentences(doc))) for doc in docs if doc)

    func_types = (ast.FunctionDef, ast.AsyncFunctionDef)
    functions = [n for n in tree.body if isinstance(n, func_types)]
    out = [document([tree, *functions])]
    for node in _classes(tree.body):
        out.append(document([node, *(n for n in node.body if isinstance(n, func_types))]))
    return tuple(out)


@functools.cache
def _topic_texts(path: pathlib.Path, stamp: tuple[int, int]) -> _Document:
    """pydoc_data/topics.py: the language reference as a dict literal of plain-text topics."""
    tree = _parse(path)
    if tree is None:
        return ()
    texts = [value.value for node in tree.body
             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
             for value in node.value.values if isinstance(value, ast.Constant)]  # fmt: skip
    return tuple((t, tuple(docstring_sentences(t))) for t in texts if isinstance(t, str))


def _unseen(document: _Document, seen: set[str]) -> list[str]:
    """The sentences of the document's texts not met before (`seen` grows)."""
    out: list[str] = []
    for text, sentences in document:
        if text not in seen:
            seen.add(text)
            out += sentences
    return out


def _documents_of_file(path: pathlib.Path, seen: set[str]) -> Iterator[list[str]]:
    for document in _file_documents(path, _stamp(path)):
        yield _unseen(document, seen)


def _topic_documents(path: pathlib.Path, seen: set[str]) -> Iterator[list[str]]:
    if path.exists():
        for pair in _topic_texts(path, _stamp(path)):
            if pair[0] not in seen:
                yield _unseen((pair,), seen)


def _package_dir(name: str) -> pathlib.Path | None:
    try:
        spec = importlib.util.find_spec(name)  # locates the package without importing it
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(sorted(spec.submodule_search_locations)[0])


def package_versions(packages: tuple[str, ...] = DEFAULT_PACKAGES) -> dict[str, str]:
    """The versions the corpus text depends on (absent packages are left out)."""
    versions = {"python": platform.python_version()}
    for name in packages:
        dist = {"sklearn": "scikit-learn"}.get(name, name)
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[dist] = importlib.metadata.version(dist)
    return versions


def _topics_file() -> pathlib.Path:
    return stdlib_dir() / "pydoc_data" / "topics.py"


def _reading_order(packages: tuple[str, ...]) -> list[pathlib.Path]:
    """Every file the corpus reads, in order: the standard library, the language reference's
    topics, then each installed package of `packages`."""
    files = [*_source_files(stdlib_dir()), _topics_file()]
    for name in packages:
        package_dir = _package_dir(name)
        if package_dir is not None:
            files += _source_files(package_dir)
    return files


def _cache_key(files: list[pathlib.Path], packages: tuple[str, ...]) -> str:
    """What the documents depend on (bert_jax.corpus.embedded_cache): this module's code, the
    Python version, the packages, and each file's path, size and mtime."""
    digest = hashlib.sha256(pathlib.Path(__file__).read_bytes())
    digest.update(f"{platform.python_version()}\0{','.join(packages)}\n".encode())
    for path in files:
        stamp = _stamp(path) if path.exists() else (-1, -1)
        digest.update(f"{path}\0{stamp[0]}\0{stamp[1]}\n".encode())
    return digest.hexdigest()[:32]


def _parsed_documents(files: list[pathlib.Path]) -> Iterator[list[str]]:
    """Each file's documents, without the texts met before (empty documents included)."""
    topics = _topics_file()
    seen: set[str] = set()
    for path in files:
        if path == topics:
            yield from _topic_documents(path, seen)
        else:
            yield from _documents_of_file(path, seen)


def _all_documents(packages: tuple[str, ...]) -> Iterator[list[str]]:
    """The de-duplicated documents in reading order: from the disk cache when it holds this
    key, else parsed; a pass that parses to the end stores its documents for later processes."""
    files = _reading_order(packages)
    key = _cache_key(files, packages)
    cached = embedded_cache.load(key)
    if cached is not None:
        for doc in cached:
            yield list(doc)
        return
    parsed: list[list[str]] = []
    for doc in _parsed_documents(files):
        parsed.append(doc)
        yield list(doc)
    embedded_cache.save(key, parsed)


def iter_documents(
    max_documents: int | None = None,
    min_sentences: int = 2,
    packages: tuple[str, ...] = DEFAULT_PACKAGES,
) -> Iterator[list[str]]:
    """Yields documents (lists of sentences) in a fixed order: the standard library, the language
    reference topics, then the docstrings of `packages` that are installed. Documents with fewer
    than `min_sentences` sentences are skipped."""
    count = 0
    for doc in _all_documents(tuple(packages)):
        if len(doc) < min_sentences:
            continue
        yield doc
        count += 1
        if max_documents is not None and count >= max_documents:
            return


def write_corpus(
    path: str | os.PathLike,
    max_bytes: int | None = None,
    max_documents: int | None = None,
    packages: tuple[str, ...] = DEFAULT_PACKAGES,
) -> dict[str, int | float | str]:
    """Writes the corpus (whole documents, at most `max_bytes` UTF-8 bytes) atomically; returns
    its stats: documents, sentences, bytes, megabytes, path."""
    return write_documents(
        path, iter_documents(max_documents=max_documents, packages=packages), max_bytes
    )


def write_documents(
    path: str | os.PathLike, docs: Iterator[list[str]], max_bytes: int | None = None
) -> dict[str, int | float | str]:
    """`docs` in the corpus format (one sentence a line, a blank line between documents), whole
    documents up to `max_bytes` UTF-8 bytes, written atomically; returns the stats: documents,
    sentences, bytes, megabytes, path."""
    documents = sentences = size = 0
    with open_atomic(path) as f:
        for doc in docs:
            text = ("\n" if documents else "") + "\n".join(doc) + "\n"
            nbytes = len(text.encode("utf-8"))
            if max_bytes is not None and size + nbytes > max_bytes:
                break
            f.write(text)
            documents += 1
            sentences += len(doc)
            size += nbytes
    return {
        "path": str(path),
        "documents": documents,
        "sentences": sentences,
        "bytes": size,
        "megabytes": round(size / 2**20, 3),
    }
