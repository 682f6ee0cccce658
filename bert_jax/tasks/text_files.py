"""Task data files read as UTF-8 text: a file that is not names its first bad line and byte, the
same for every reader (GLUE's TSV, CoNLL NER, SWAG's CSV), instead of a UnicodeDecodeError."""

from __future__ import annotations

from etils import epath

from bert_jax.errors import BertJaxError


def read_utf8(path: str) -> str:
    """The whole file (local or gs://) as text."""
    if not epath.Path(path).exists():
        raise BertJaxError(f"{path}: no such file")
    data = epath.Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise BertJaxError(
            f"{path}: line {line}: not UTF-8 (byte 0x{data[e.start]:02x}; Latin-1?); convert it, "
            "e.g. iconv -f LATIN1 -t UTF-8"
        ) from None
