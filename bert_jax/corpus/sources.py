"""Corpus sources in the reference's text format: one sentence per line, blank line between
documents.

`--input_file` is a comma-separated list of entries, each one of
- a glob of text files, local or anything `etils.epath` reads (gs://bucket/wiki-*.txt); matches
  are sorted; a pattern matching nothing is an error;
- `embedded:` or `embedded:N` (first N documents): the docstring corpus of
  bert_jax.data.embedded_corpus (real English from the installed Python, no download);
- `tfds:NAME[:SPLIT][#FEATURE]` a tensorflow-datasets text dataset (needs tfds and its data):
  each example's text feature (default `text`) is one document, split into lines at newlines and
  into sentences after `.`, `!` or `?` followed by whitespace.

Decoding: bytes that are not UTF-8 are replaced with U+FFFD (which the tokenizer drops) and the
lines are counted in stats (`lines_with_invalid_utf8`). A line longer than `max_line_chars` is cut
at whitespace into several sentences (counted as `long_lines_split`), so one runaway line cannot
exhaust memory. Empty files contribute nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Iterator

from etils import epath

from bert_jax.corpus import embedded as embedded_corpus
from bert_jax.errors import BertJaxError

EMBEDDED = "embedded:"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


# The embedded corpus's text depends on the installed Python, numpy, scipy, scikit-learn and
# matplotlib; its sha256 (recorded in stats.json) is kept here once a full read has computed it.
_EMBEDDED_SHA256: dict[str, str] = {}


@dataclasses.dataclass(frozen=True)
class Source:
    """One input: a file path, the embedded corpus, or a tfds dataset (`kind` says which)."""

    kind: str  # "file" | "embedded" | "tfds"
    name: str

    def iter_bytes(self, chunk_bytes: int = 1 << 22) -> Iterator[bytes]:
        """The corpus as raw bytes in the one-sentence-per-line format, in chunks."""
        if self.kind == "file":
            with epath.Path(self.name).open("rb") as f:
                while chunk := f.read(chunk_bytes):
                    yield chunk
        elif self.kind == "embedded":
            limit = int(self.name) if self.name else None
            digest = hashlib.sha256()
            parts, size = [], 0
            for doc in embedded_corpus.iter_documents(max_documents=limit):
                parts.append("\n".join(doc) + "\n\n")
                size += len(parts[-1])
                if size >= chunk_bytes:
                    chunk = "".join(parts).encode("utf-8")
                    digest.update(chunk)
                    yield chunk
                    parts, size = [], 0
            if parts:
                chunk = "".join(parts).encode("utf-8")
                digest.update(chunk)
                yield chunk
            _EMBEDDED_SHA256[self.name] = digest.hexdigest()
        else:
            yield from _tfds_chunks(self.name)


def resolve_inputs(input_file: str | list[str], flag: str = "--input_file") -> list[Source]:
    """Expand the comma-separated entries of --input_file (or `flag`) into sources, in order."""
    entries = input_file.split(",") if isinstance(input_file, str) else list(input_file)
    sources: list[Source] = []
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        if entry.startswith(EMBEDDED):
            limit = entry[len(EMBEDDED) :]
            if limit and not limit.isdigit():
                raise BertJaxError(f"{flag}: {entry}: expected embedded: or embedded:N")
            sources.append(Source("embedded", limit))
        elif entry.startswith("tfds:"):
            sources.append(Source("tfds", entry[len("tfds:") :]))
        else:
            matches = _glob(entry, flag)
            if not matches:
                raise BertJaxError(f"{flag}: {entry}: no file matches")
            sources.extend(Source("file", m) for m in matches)
    if not sources:
        raise BertJaxError(f"{flag}: no input given")
    return sources


SNIFF_BYTES = 1 << 16
# Above this share of undecodable lines at its start, a file is refused as not UTF-8 (a few bad
# lines are kept, their bad bytes dropped, and counted).
MAX_INVALID_SHARE = 0.25


def check_text(sources: list[Source]) -> None:
    """Refuse files that are not UTF-8 text, from their first 64 KB: UTF-16/32 (a byte-order mark
    or NUL bytes: its newlines are not b"\\n", so documents would merge), binary data, or a legacy
    encoding such as Latin-1 on most lines (their accented letters would be dropped), and input
    that is all empty files or blank lines (it would replace the output with empty shards)."""
    has_text = False
    for source in sources:
        if source.kind != "file":
            has_text = True
            continue
        with epath.Path(source.name).open("rb") as f:
            head = f.read(SNIFF_BYTES)
        if head.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise BertJaxError(
                f"{source.name}: UTF-16/32 text (byte-order mark); convert it to UTF-8, e.g. "
                "iconv -f UTF-16 -t UTF-8"
            )
        if b"\x00" in head:
            line = head.count(b"\n", 0, head.index(b"\x00")) + 1
            raise BertJaxError(
                f"{source.name}: NUL bytes in the first {len(head)} bytes (the first on line "
                f"{line}): binary or UTF-16/32, not UTF-8 text"
            )
        lines = head.split(b"\n")
        if len(head) == SNIFF_BYTES:
            lines = lines[:-1]  # the cut may split a character
        numbered = [(n, x) for n, x in enumerate(lines, 1) if x.strip()]
        has_text = has_text or bool(numbered) or len(head) == SNIFF_BYTES
        bad: list[int] = []  # line numbers
        for n, line in numbered:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                bad.append(n)
        if len(bad) >= 5 and len(bad) > MAX_INVALID_SHARE * len(numbered):
            raise BertJaxError(
                f"{source.name}: {len(bad)} of the first {len(numbered)} lines are not UTF-8 "
                f"(the first: line {bad[0]}; binary data, or Latin-1 or another legacy "
                "encoding?); convert it, e.g. iconv -f LATIN1 -t UTF-8"
            )
    if sources and not has_text:
        names = ", ".join(s.name for s in sources[:3]) + (", ..." if len(sources) > 3 else "")
        raise BertJaxError(f"{names}: no text (empty, or blank lines only)")


def _glob(pattern: str, flag: str) -> list[str]:
    if not any(c in pattern for c in "*?["):
        path = epath.Path(pattern)
        if path.is_dir():
            raise BertJaxError(f"{flag}: {pattern}: is a directory, expected text files")
        return [pattern] if path.exists() else []
    path = epath.Path(pattern)
    # epath globs relative to a concrete parent; split the pattern at its first wildcard part.
    parts = pattern.split("/")
    first = next(i for i, p in enumerate(parts) if any(c in p for c in "*?["))
    root = "/".join(parts[:first]) or ("/" if pattern.startswith("/") else ".")
    rest = "/".join(parts[first:])
    del path
    return sorted(str(p) for p in epath.Path(root).glob(rest) if not p.is_dir())


def _tfds_chunks(spec: str) -> Iterator[bytes]:
    name, _, feature = spec.partition("#")
    name, _, split = name.partition(":")
    try:
        import tensorflow_datasets as tfds
    except ImportError as e:
        raise BertJaxError(f"tfds:{spec}: tensorflow-datasets is not installed") from e
    # TFDS_DATA_DIR as read now, not when tfds was first imported
    ds = tfds.load(name, split=split or "train", data_dir=os.environ.get("TFDS_DATA_DIR"))
    feature = feature or "text"
    for example in tfds.as_numpy(ds):
        if feature not in example:
            raise BertJaxError(f"tfds:{spec}: no feature {feature!r}; has {sorted(example)}")
        yield text_to_document(example[feature]).encode("utf-8")


def text_to_document(text: bytes | str) -> str:
    """Free text -> sentence lines + a blank line (one document)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    lines = []
    for paragraph in text.split("\n"):
        lines.extend(s for s in _SENTENCE_END.split(paragraph.strip()) if s)
    return "\n".join(lines) + "\n\n"


@dataclasses.dataclass
class DecodeStats:
    lines: int = 0
    invalid_utf8_lines: int = 0
    long_lines_split: int = 0
    text_bytes: int = 0


def decode_lines(data: bytes, max_line_chars: int, stats: DecodeStats) -> Iterator[str]:
    """Split on b"\\n" (as TF's readline), decode, strip; long lines become several lines."""
    stats.text_bytes += len(data)
    for raw in data.split(b"\n"):
        stats.lines += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line = raw.decode("utf-8", errors="replace")
            stats.invalid_utf8_lines += 1
        line = line.strip()
        if max_line_chars and len(line) > max_line_chars:
            stats.long_lines_split += 1
            yield from _split_long(line, max_line_chars)
        else:
            yield line


def _split_long(line: str, limit: int) -> Iterator[str]:
    while len(line) > limit:
        cut = line.rfind(" ", 0, limit)
        cut = limit if cut <= 0 else cut
        yield line[:cut].strip()
        line = line[cut:].strip()
    if line:
        yield line


def iter_blocks(sources: list[Source], block_bytes: int) -> Iterator[tuple[int, int, bytes]]:
    """(source index, block index, bytes) over all sources, in order."""
    for s_index, source in enumerate(sources):
        for b_index, data in source_blocks(source, block_bytes):
            yield s_index, b_index, data


def source_blocks(source: Source, block_bytes: int) -> Iterator[tuple[int, bytes]]:
    """One source cut into blocks of whole documents of about `block_bytes` (at a blank line;
    at a line end if a document is longer). Depends only on the bytes, so blocks are the same
    whatever the worker count or runner."""
    b_index, pending = 0, b""
    for chunk in source.iter_bytes():
        pending += chunk
        while len(pending) >= block_bytes:
            cut = pending.rfind(b"\n\n", 0, block_bytes)
            if cut < block_bytes // 4:  # a long document: cut at a line end instead
                cut = pending.rfind(b"\n", 0, block_bytes)
            if cut <= 0:  # one line longer than a block
                cut = pending.find(b"\n", block_bytes)
                if cut < 0:
                    break
            yield b_index, pending[: cut + 1]
            b_index += 1
            pending = pending[cut + 1 :]
    if pending.strip():
        yield b_index, pending


def embedded_fingerprints(sources: list[Source]) -> dict[str, object]:
    """A shard set's stats.json record of the embedded corpus text among `sources` (it varies
    with package versions): {} when none is embedded."""
    found = [embedded_fingerprint(src) for src in sources if src.kind == "embedded"]
    return {"embedded_corpus": found[0] if len(found) == 1 else found} if found else {}


def embedded_fingerprint(source: Source) -> dict[str, object]:
    """sha256 of an embedded source's text and the package versions that text comes from."""
    if source.name not in _EMBEDDED_SHA256:  # not read in this process (e.g. Beam workers)
        for _ in source.iter_bytes():
            pass
    return {
        "sha256": _EMBEDDED_SHA256[source.name],
        "versions": embedded_corpus.package_versions(),
    }
