"""`tf.train.Example` records without TensorFlow: the one encoder and decoder of shard records.

Encoding writes the protobuf wire format directly: int features as one packed int64 list
(varints; negative values as 10-byte two's complement), float features as one packed float list,
anything else as a bytes list, with the map entries in the mapping's order. That is the bytes
protobuf (and so TensorFlow) writes for the same Example except for the order of map entries,
which protobuf leaves to its hash table (it varies between processes) unless asked for
deterministic output (sorted keys: then the bytes are the same for a mapping in sorted order).
Writing a fixed order keeps shards reproducible byte for byte.

Decoding one record uses protobuf message classes built here from a descriptor with
tensorflow/core/example's package, names and field numbers, in a private descriptor pool (no
clash with TensorFlow's own classes). Decoding a batch against a schema parses each record with a
variant whose lists are a single `bytes` field, so protobuf hands over every packed list as one
blob, and then decodes the varints of the whole batch at once in numpy; records that do not fit
that shape (unpacked lists, wrong lengths) go through the full parse, which names the feature.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from bert_jax.errors import BertJaxError
from bert_jax.shards.schema import Feature, Schema
from bert_jax.shards.tfrecord import RecordReader

# Feature's oneof as wire tags (field number << 3 | length-delimited).
_BYTES, _FLOAT, _INT64 = 0x0A, 0x12, 0x1A
_LIST_KIND = {"int64": "int64_list", "float32": "float_list"}
_NUMPY = {"int64": np.int64, "float32": np.float32}

# ------------------------------------------------------------------------------------- encoding


def _varint(v: int) -> bytes:
    """Base-128 varint of a non-negative int."""
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_SMALL = tuple(_varint(v) for v in range(1 << 15))  # every id of a 30k-32k vocab, every length


def _len(n: int) -> bytes:
    return _SMALL[n] if n < len(_SMALL) else _varint(n)


@functools.lru_cache(maxsize=65536)
def _prefix(key: str, kind: int, payload_len: int) -> bytes:
    """Every byte of one map entry before its list's payload (it depends only on the length).

    Packed lists wrap the payload in field 1 (left out when empty, as protobuf does); a bytes
    list's payload is already its repeated field 1."""
    packed = b"\x0a" + _len(payload_len) if kind != _BYTES and payload_len else b""
    feature = bytes((kind,)) + _len(len(packed) + payload_len) + packed
    name = key.encode()
    entry = b"\x0a" + _len(len(name)) + name + b"\x12" + _len(len(feature) + payload_len) + feature
    return b"\x0a" + _len(len(entry) + payload_len) + entry


def _varint_rows(a_NxK: np.ndarray) -> tuple[bytes, list[int]]:
    """Packed varints of each row, concatenated, and the rows' byte offsets [N+1]."""
    n, k = a_NxK.shape
    a = a_NxK.astype(np.int64, copy=False).view(np.uint64)  # negatives: 10-byte two's complement
    top = int(a.max()) if a.size else 0
    if top < 0x80:  # masks, segment ids, labels: one byte per value
        return a.astype(np.uint8).tobytes(), [r * k for r in range(n + 1)]
    width = (top.bit_length() + 6) // 7
    nbytes = np.ones(a.shape, np.int64)
    for j in range(1, width):
        nbytes += a >= np.uint64(1 << (7 * j))
    out = np.empty(a.shape + (width,), np.uint8)
    for j in range(width):
        more = (nbytes > j + 1).astype(np.uint8) << 7
        out[..., j] = ((a >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8) | more
    flat = out[np.arange(width) < nbytes[..., None]].tobytes()
    return flat, [0, *np.cumsum(nbytes.sum(axis=1)).tolist()]


def _list(values: Sequence | np.ndarray) -> tuple[int, bytes]:
    """(Feature kind tag, list payload) of one feature's values."""
    if isinstance(values, list | tuple) and values and type(values[0]) is int:
        try:  # the common case (token ids) without numpy; a float or bytes falls through
            if min(values) >= 0:
                small = _SMALL
                return _INT64, b"".join([small[v] for v in values])
        except (IndexError, TypeError):
            pass
    arr = np.asarray(values)
    if arr.dtype == bool or np.issubdtype(arr.dtype, np.integer):
        return _INT64, _varint_rows(arr.reshape(1, -1))[0]
    if np.issubdtype(arr.dtype, np.floating):
        return _FLOAT, arr.astype("<f4").tobytes()
    items = [v if isinstance(v, bytes) else str(v).encode() for v in arr.ravel().tolist()]
    return _BYTES, b"".join(b"\x0a" + _len(len(v)) + v for v in items)


def encode(features: Mapping[str, Sequence | np.ndarray]) -> bytes:
    """One Example: int values as int64_list, floats as float_list, bytes/str as bytes_list."""
    parts = []
    for key, values in features.items():
        kind, payload = _list(values)
        parts += (_prefix(key, kind, len(payload)), payload)
    body = b"".join(parts)
    return b"\x0a" + _len(len(body)) + body


def encode_batch(columns: Mapping[str, np.ndarray]) -> list[bytes]:
    """Row r of every [N, K] column -> Example r, features in the mapping's order: integer
    columns as int64_list, floating ones as float_list (float32). Byte-identical to `encode`."""
    encoded = []
    n = None
    for key, a in columns.items():
        a = np.asarray(a)
        if a.ndim != 2 or (n is not None and len(a) != n):
            raise ValueError(f"column {key!r}: shape {a.shape}, expected [{n or 'N'}, K]")
        n = len(a)
        if a.dtype == bool or np.issubdtype(a.dtype, np.integer):
            flat, offsets = _varint_rows(a)
            encoded.append((key, _INT64, flat, offsets))
        elif np.issubdtype(a.dtype, np.floating):
            width = 4 * a.shape[1]
            offsets = [r * width for r in range(n + 1)]
            encoded.append((key, _FLOAT, a.astype("<f4").tobytes(), offsets))
        else:
            raise TypeError(f"column {key!r}: dtype {a.dtype} is neither integer nor floating")
    records = []
    prefix = _prefix
    for r in range(n or 0):
        parts = []
        append = parts.append
        for key, kind, flat, offsets in encoded:
            start, stop = offsets[r], offsets[r + 1]
            append(prefix(key, kind, stop - start))
            append(flat[start:stop])
        body = b"".join(parts)
        records.append(b"\x0a" + _len(len(body)) + body)
    return records


# ------------------------------------------------------------------------------------- decoding


def _message_class(package: str, raw: bool):
    """The Example message class; with `raw`, every list is one optional `bytes` field."""
    f = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name=f"bert_jax/{package}.proto", package=package, syntax="proto3"
    )
    kinds = (("bytes_list", "BytesList"), ("float_list", "FloatList"), ("int64_list", "Int64List"))
    for (_, message), scalar in zip(kinds, (f.TYPE_BYTES, f.TYPE_FLOAT, f.TYPE_INT64), strict=True):
        value = fdp.message_type.add(name=message).field.add(name="value", number=1)
        if raw:
            value.label, value.type = f.LABEL_OPTIONAL, f.TYPE_BYTES
        else:
            value.label, value.type = f.LABEL_REPEATED, scalar
    feature = fdp.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, (field, message) in enumerate(kinds, 1):
        feature.field.add(
            name=field,
            number=number,
            label=f.LABEL_OPTIONAL,
            type=f.TYPE_MESSAGE,
            type_name=f".{package}.{message}",
            oneof_index=0,
        )
    features = fdp.message_type.add(name="Features")
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=f.LABEL_OPTIONAL, type=f.TYPE_STRING)
    entry.field.add(
        name="value",
        number=2,
        label=f.LABEL_OPTIONAL,
        type=f.TYPE_MESSAGE,
        type_name=f".{package}.Feature",
    )
    features.field.add(
        name="feature",
        number=1,
        label=f.LABEL_REPEATED,
        type=f.TYPE_MESSAGE,
        type_name=f".{package}.Features.FeatureEntry",
    )
    fdp.message_type.add(name="Example").field.add(
        name="features",
        number=1,
        label=f.LABEL_OPTIONAL,
        type=f.TYPE_MESSAGE,
        type_name=f".{package}.Features",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Example"))


Example = _message_class("tensorflow", raw=False)
_RawExample = _message_class("bert_jax_raw", raw=True)


def decode(record: bytes) -> dict[str, np.ndarray]:
    """Any serialised Example -> {name: int64 | float32 | object (bytes) array}, in protobuf's
    map order (not the record's)."""
    example = Example()
    example.ParseFromString(record)
    out: dict[str, np.ndarray] = {}
    for key, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        if kind == "int64_list":
            out[key] = np.asarray(feature.int64_list.value, dtype=np.int64)
        elif kind == "float_list":
            out[key] = np.asarray(feature.float_list.value, dtype=np.float32)
        elif kind == "bytes_list":
            out[key] = np.asarray(list(feature.bytes_list.value), dtype=object)
        else:
            out[key] = np.zeros((0,), dtype=np.float32)
    return out


def _decode_varints(b: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The varints of bytes `b` (`last` marks each value's final byte), as int64."""
    starts = np.flatnonzero(np.concatenate(([True], last[:-1])))
    group = np.cumsum(np.concatenate(([0], last[:-1])), dtype=np.int64)
    shift = (np.arange(b.size, dtype=np.int64) - starts[group]) * 7
    parts = (b & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts).view(np.int64)


def _int_column(blobs: list[bytes], n: int, length: int) -> np.ndarray | None:
    """[n, length] int64 from each record's packed blob; None unless every blob holds exactly
    `length` complete varints."""
    b = np.frombuffer(b"".join(blobs), np.uint8)
    if b.size == 0 or length == 0:
        return np.zeros((n, length), np.int64) if b.size == 0 and length * n == 0 else None
    last = b < 0x80
    if last.all():  # every value < 128: one byte each
        if list(map(len, blobs)).count(length) != n:
            return None
        return b.astype(np.int64).reshape(n, length)
    ends = np.cumsum(np.fromiter(map(len, blobs), np.int64, n)) - 1
    done = np.cumsum(last, dtype=np.int64)
    if ends[0] < 0 or not last[ends].all():  # a blob empty or ending inside a varint
        return None
    if not np.array_equal(done[ends], np.arange(1, n + 1, dtype=np.int64) * length):
        return None
    return _decode_varints(b, last).reshape(n, length)


def _float_column(blobs: list[bytes], n: int, length: int) -> np.ndarray | None:
    if list(map(len, blobs)).count(4 * length) != n:
        return None
    return np.frombuffer(b"".join(blobs), "<f4").astype(np.float32).reshape(n, length)


def decode_batch(records: Sequence[bytes], schema: Schema) -> dict[str, np.ndarray]:
    """Records -> {name: int64 or float32 array [len(records), length]} for the schema's
    features; raises BertJaxError naming the feature when a record does not match."""
    n = len(records)
    blobs: dict[str, list[bytes]] = {f.name: [] for f in schema}
    plan = [
        (f.name, operator.attrgetter(f"{_LIST_KIND[f.dtype]}.value"), blobs[f.name].append)
        for f in schema
    ]
    example = _RawExample()
    try:
        for record in records:
            example.ParseFromString(record)
            feature_map = example.features.feature  # re-fetched: parsing detaches the old view
            for name, get, append in plan:
                append(get(feature_map[name]))
    except DecodeError:
        return _decode_batch_slow(records, schema)
    out: dict[str, np.ndarray] = {}
    for f in schema:
        column = _float_column if f.dtype == "float32" else _int_column
        values = column(blobs[f.name], n, f.length)
        if values is None:
            return _decode_batch_slow(records, schema)
        out[f.name] = values
    return out


def _mismatch(features: dict[str, np.ndarray], f: Feature) -> str | None:
    """What is wrong with feature `f` of a decoded record (text that follows "record i")."""
    want = _LIST_KIND[f.dtype]
    values = features.get(f.name)
    if values is None:
        found = sorted(features)
        return f" has no feature {f.name!r} (expected {want} x {f.length}; found {found})"
    kinds = {np.dtype(object): "bytes_list", np.dtype(np.float32): "float_list"}
    found = kinds.get(values.dtype, "int64_list")
    if found != want:
        return f": feature {f.name!r} is {found}, expected {want}"
    if values.size != f.length:
        return f": feature {f.name!r} has length {values.size}, expected {f.length}"
    return None


def _decode_one(record: bytes, where: str) -> dict[str, np.ndarray]:
    try:
        return decode(record)
    except DecodeError as e:
        raise BertJaxError(f"{where} is not a tf.train.Example ({e})") from None


def _decode_batch_slow(records: Sequence[bytes], schema: Schema) -> dict[str, np.ndarray]:
    """Unpacked encodings (or a bad record): the full parse, with a clear error on mismatch."""
    out = {f.name: np.zeros((len(records), f.length), _NUMPY[f.dtype]) for f in schema}
    for i, record in enumerate(records):
        features = _decode_one(record, f"record {i} of a batch")
        for f in schema:
            problem = _mismatch(features, f)
            if problem:
                raise BertJaxError(
                    f"record {i} of a batch{problem} (the first record of every file was "
                    "fine: the shards are inconsistent)"
                )
            out[f.name][i] = features[f.name]
    return out


def check_first_record(path: str, schema: Schema) -> dict[str, np.ndarray]:
    """The first record's features; BertJaxError naming the file and the feature if it does not
    match `schema` (or the file is empty or not TFRecords of Examples)."""
    with RecordReader(path, chunk_bytes=1 << 16) as reader:
        first = next(reader, None)
    if first is None:
        raise BertJaxError(f"{path}: no records (empty TFRecord file)")
    features = _decode_one(first, f"{path}: record 0")
    for f in schema:
        problem = _mismatch(features, f)
        if problem:
            raise BertJaxError(f"{path}: record 0{problem}")
    return features
