"""Vocab files as google-research/bert reads them: one token per line, stripped, id = line index."""

from __future__ import annotations

import collections
import dataclasses
import os

from etils import epath

from bert_jax import file_set
from bert_jax.errors import BertJaxError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_vocab(vocab_file: str | os.PathLike) -> collections.OrderedDict[str, int]:
    """Returns token -> id like the reference `load_vocab` (a repeated token keeps its last id);
    a byte-level BPE vocab.json / tokenizer.json gives its tokens by id (RoBERTa)."""
    path = epath.Path(vocab_file)
    if path.name.endswith(".json"):
        from bert_jax.tokenization.byte_bpe import ByteBpeTokenizer

        return ByteBpeTokenizer(path).vocab
    file_set.finish_publish(path.parent)  # a build-vocab killed mid-publish: complete its set
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BertJaxError(f"{vocab_file}: vocab file not found") from None
    except IsADirectoryError:
        raise BertJaxError(f"{vocab_file}: is a directory, expected a vocab.txt file") from None
    # The reference decodes with errors="ignore" and reads in text mode (universal newlines).
    text = data.decode("utf-8", errors="ignore").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    vocab: collections.OrderedDict[str, int] = collections.OrderedDict()
    for index, line in enumerate(lines):
        vocab[line.strip()] = index
    if not vocab:
        raise BertJaxError(f"{vocab_file}: vocab file is empty, expected one token per line")
    return vocab


@dataclasses.dataclass(frozen=True)
class SpecialIds:
    pad: int
    unk: int
    cls: int
    sep: int
    mask: int


def special_ids(vocab: dict[str, int], vocab_file: str | os.PathLike = "vocab") -> SpecialIds:
    """Ids of [PAD] [UNK] [CLS] [SEP] [MASK]; a clear error naming the file if one is missing."""
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise BertJaxError(
            f"{vocab_file}: vocab lacks {', '.join(missing)}; a BERT vocab needs "
            f"{', '.join(SPECIAL_TOKENS)} (each on its own line)"
        )
    return SpecialIds(*(vocab[t] for t in SPECIAL_TOKENS))
