"""TFRecord files without TensorFlow: the same framing TensorFlow writes and reads.

Each record is `uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)`
(little endian), with CRC-32C from the C-accelerated `google-crc32c` package. Writers are atomic:
records go to a temporary name in the same directory and are renamed to the final name on
`close()`; a failed or interrupted run leaves nothing under the final name. Paths may be local or
anything `etils.epath` opens (gs://...).
"""

from __future__ import annotations

import contextlib
import os
import struct
import uuid
from collections.abc import Iterator

import google_crc32c
from etils import epath

from bert_jax.errors import BertJaxError

_MASK_DELTA = 0xA282EAD8
_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")
_LENGTH = struct.Struct("<Q")


def masked_crc32c(data: bytes) -> int:
    """TensorFlow's masked CRC: rotate right by 15 and add a constant (crc32c.h)."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    """One serialized record: header, payload, payload CRC."""
    length = _LENGTH.pack(len(data))
    return b"".join(
        (length, _FOOTER.pack(masked_crc32c(length)), data, _FOOTER.pack(masked_crc32c(data)))
    )


class TFRecordWriter:
    """Appends records to `<path>.tmp-*`; `close()` renames it to `path`, `abort()` deletes it.

    Used as a context manager, an exception inside the block aborts (no file under `path`).
    """

    def __init__(self, path: str | os.PathLike, buffer_bytes: int = 1 << 20):
        self.path = epath.Path(path)
        self._tmp = self.path.parent / f".{self.path.name}.tmp-{uuid.uuid4().hex[:12]}"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self._tmp.open("wb")
        except OSError as e:
            raise BertJaxError(f"{self.path}: cannot write output: {e.strerror or e}") from e
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._buffer_bytes = buffer_bytes
        self.num_records = 0

    def write(self, data: bytes) -> None:
        self._buffer.append(frame(data))
        self._buffered += len(data) + 16
        self.num_records += 1
        if self._buffered >= self._buffer_bytes:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            try:
                self._file.write(b"".join(self._buffer))
            except OSError as e:  # disk full, quota, lost mount: one line, no shard left behind
                self.abort()
                raise BertJaxError(f"{self.path}: cannot write output: {e.strerror or e}") from e
            self._buffer, self._buffered = [], 0

    def close(self) -> None:
        if self._file is None:
            return
        try:
            self._flush()
            self._file.close()
            self._file = None
            self._tmp.replace(self.path)
        except OSError as e:
            self.abort()
            raise BertJaxError(f"{self.path}: cannot write output: {e.strerror or e}") from e
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Drop everything written so far; the final name is never created."""
        if self._file is not None:
            try:
                self._file.close()
            finally:
                self._file = None
        with contextlib.suppress(OSError):
            self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class RecordReader:
    """Payloads of one TFRecord file, from byte `offset` (which must be a record boundary).

    `offset` is always the byte offset of the next record, so `RecordReader(path, r.offset)`
    continues exactly where `r` stands. With `verify`, both CRCs of every record are checked; a
    bad CRC or a truncated record raises BertJaxError naming the file, the record number (when
    reading started at 0) and the record's byte offset. The file is read in chunks of
    `chunk_bytes` and framed a chunk at a time, so the per-record cost is a few list operations
    plus the CRC of the payload.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        offset: int = 0,
        verify: bool = True,
        chunk_bytes: int = 1 << 20,
    ):
        self.path = path
        self.verify = verify
        self._chunk_bytes = chunk_bytes
        self._file = epath.Path(path).open("rb")
        if offset:
            self._file.seek(offset)
        self._buffer = b""  # unframed bytes, starting at file offset self._buffer_offset
        self._buffer_offset = offset
        self._index: int | None = 0 if offset == 0 else None  # number of the next record
        self._records: list[bytes] = []  # framed from the last chunk, not yet returned
        self._ends: list[int] = []  # file offset after each of self._records
        self._next = 0
        self._start = offset  # file offset of self._records[0]
        self._error: BertJaxError | None = None  # met while framing; raised when reached
        # Record lengths repeat (fixed-size Examples), so their CRCs are computed once.
        self._length_crcs: dict[int, int] = {}

    @property
    def offset(self) -> int:
        """Byte offset of the next record (the file size once every record was returned)."""
        return self._ends[self._next - 1] if self._next else self._start

    def __iter__(self) -> RecordReader:
        return self

    def __next__(self) -> bytes:
        i = self._next
        if i == len(self._records):
            self._refill()
            i = 0
        self._next = i + 1
        return self._records[i]

    def _refill(self) -> None:
        if self._index is not None:
            self._index += len(self._records)
        self._start = self.offset
        self._records, self._ends, self._next = [], [], 0
        if self._error is not None:
            raise self._error
        while True:
            # At least the buffer's size again: a record longer than a chunk costs O(length).
            chunk = self._file.read(max(self._chunk_bytes, len(self._buffer)))
            self._buffer = self._buffer + chunk if self._buffer else chunk
            self._frame(at_eof=not chunk)
            if self._records:
                return  # a bad record after them is raised once they are all returned
            if self._error is not None:
                raise self._error
            if not chunk:
                raise StopIteration

    def _frame(self, at_eof: bool) -> None:
        """Moves every complete record of the buffer to self._records (a bad one is kept in
        self._error, after the good records before it)."""
        buf, pos, end = self._buffer, 0, len(self._buffer)
        records, ends = self._records, self._ends
        unpack, footer, crc = _HEADER.unpack_from, _FOOTER.unpack_from, google_crc32c.value
        length_crcs, verify, base = self._length_crcs, self.verify, self._buffer_offset
        while end - pos >= 12:
            length, length_crc = unpack(buf, pos)
            if verify:
                want = length_crcs.get(length)
                if want is None:
                    want = masked_crc32c(buf[pos : pos + 8])
                    if want == length_crc:
                        length_crcs[length] = want
                if want != length_crc:
                    self._error = self._bad(len(records), base + pos, "bad CRC (length)")
                    break
            stop = pos + 12 + length
            if stop + 4 > end:
                break  # the rest of this record is in the next chunk
            data = buf[pos + 12 : stop]
            if verify:
                (stored,) = footer(buf, stop)
                c = crc(data)
                if (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF != stored:
                    self._error = self._bad(len(records), base + pos, "bad CRC")
                    break
            records.append(data)
            pos = stop + 4
            ends.append(base + pos)
        if at_eof and pos < end and self._error is None:
            what = "truncated header" if end - pos < 12 else "truncated record"
            self._error = self._bad(len(records), base + pos, what)
        if self._error is not None:
            pos = end  # nothing after a bad record is trusted
        self._buffer = buf[pos:]
        self._buffer_offset = base + pos

    def _bad(self, k: int, offset: int, what: str) -> BertJaxError:
        """The error for the k-th record framed since the last refill, at byte `offset`."""
        if self._index is None:
            return BertJaxError(f"{self.path}: record at offset {offset}: {what}")
        return BertJaxError(f"{self.path}: record {self._index + k} (offset {offset}): {what}")

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> RecordReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_records(
    path: str | os.PathLike, verify: bool = True, limit: int | None = None
) -> Iterator[bytes]:
    """The payloads of the first `limit` (default all) records of one file."""
    with RecordReader(path, verify=verify, chunk_bytes=1 << 16 if limit else 1 << 20) as reader:
        for i, record in enumerate(reader):
            if limit is not None and i >= limit:
                return
            yield record


def count_records(path: str | os.PathLike) -> int:
    """Number of records, reading only the 12-byte headers (length CRCs checked)."""
    n, offset = 0, 0
    with epath.Path(path).open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        while offset < size:
            f.seek(offset)
            header = f.read(12)
            if len(header) < 12:
                raise BertJaxError(f"{path}: record {n} (offset {offset}): truncated header")
            length, length_crc = _HEADER.unpack(header)
            if masked_crc32c(header[:8]) != length_crc:
                raise BertJaxError(f"{path}: record {n} (offset {offset}): bad CRC (length)")
            if offset + 16 + length > size:
                raise BertJaxError(f"{path}: record {n} (offset {offset}): truncated record")
            offset += 16 + length
            n += 1
    return n
