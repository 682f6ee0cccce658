"""Text files read as UTF-8: a file that is not names its first bad line and byte, the same for
every reader (GLUE's TSV, CoNLL NER, SWAG's CSV, generate's inputs), not a UnicodeDecodeError."""

from __future__ import annotations

from etils import epath

from bert_jax.errors import BertJaxError


def read_utf8(path: str, name: str = "") -> str:
    """The whole file (local or gs://) as text; messages start with `name` (e.g.
    "--input_file=PATH"), else the path."""
    where = name or path
    if not epath.Path(path).is_file():
        raise BertJaxError(f"{where}: no such file")
    data = epath.Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise BertJaxError(
            f"{where}: line {line}: not UTF-8 (byte 0x{data[e.start]:02x}; Latin-1?); convert it, "
            "e.g. iconv -f LATIN1 -t UTF-8"
        ) from None
