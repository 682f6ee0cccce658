"""ALBERT-style SentencePiece tokenizer behind the FullTokenizer interface.

As google-research/albert's tokenization with an spm model: collapse whitespace, turn `` and ''
into ", strip accents (NFKD, drop combining characters) and lower-case when `do_lower_case`, then
SentencePiece pieces; a piece such as "▁1999," is re-split into "▁1999" and "," (ALBERT's rule
for numbers followed by a comma). Special pieces ([CLS], [SEP], [MASK]) are control symbols, so
they are never produced from raw text.
"""

from __future__ import annotations

import collections
import os
import unicodedata
from collections.abc import Iterable, Sequence

from etils import epath

from bert_jax import file_set
from bert_jax.errors import BertJaxError
from bert_jax.tokenization import layout as layout_lib

WORD_START = "\u2581"


def preprocess_text(text: str | bytes, do_lower_case: bool, keep_accents: bool = False) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="ignore")
    text = " ".join(text.strip().split()).replace("``", '"').replace("''", '"')
    if not keep_accents:
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    return text.lower() if do_lower_case else text


def load_sentencepiece(model_file: str | os.PathLike):
    """A SentencePieceProcessor read through epath (local or gs://), with one-line errors."""
    import sentencepiece as spm

    file_set.finish_publish(epath.Path(model_file).parent)  # see load_vocab
    try:
        proto = epath.Path(model_file).read_bytes()
    except FileNotFoundError:
        raise BertJaxError(f"{model_file}: sentencepiece model not found") from None
    sp = spm.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(proto)
    except (RuntimeError, OSError) as e:
        raise BertJaxError(f"{model_file}: not a sentencepiece model ({e})") from None
    return sp


class SentencePieceTokenizer:
    """`SentencePieceTokenizer(model_file, do_lower_case=True)`: tokenize / convert_* / vocab /
    inv_vocab / encode_batch, as FullTokenizer."""

    layout = layout_lib.BERT  # ALBERT frames texts as BERT does

    def __init__(
        self, model_file: str | os.PathLike, do_lower_case: bool = True, keep_accents: bool = False
    ):
        self.model_file = str(model_file)
        self.sp = load_sentencepiece(model_file)
        self.do_lower_case = do_lower_case
        self.keep_accents = keep_accents
        self.vocab = collections.OrderedDict(
            (self.sp.IdToPiece(i), i) for i in range(self.sp.GetPieceSize())
        )
        self.inv_vocab = {i: p for p, i in self.vocab.items()}
        self.unk_id = self.sp.unk_id()

    def __len__(self) -> int:
        return len(self.vocab)

    def _fix_number_comma(self, pieces: list[str]) -> list[str]:
        out: list[str] = []
        for piece in pieces:
            if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
                sub = self.sp.EncodeAsPieces(piece[:-1].replace(WORD_START, ""))
                if piece[0] != WORD_START and sub and sub[0][0] == WORD_START:
                    sub = sub[1:] if len(sub[0]) == 1 else [sub[0][1:], *sub[1:]]
                out += [*sub, piece[-1]]
            else:
                out.append(piece)
        return out

    def tokenize(self, text: str | bytes) -> list[str]:
        text = preprocess_text(text, self.do_lower_case, self.keep_accents)
        return self._fix_number_comma(self.sp.EncodeAsPieces(text))

    def encode(self, text: str | bytes) -> list[int]:
        return self.convert_tokens_to_ids(self.tokenize(text))

    def pieces_to_text(self, pieces: Sequence[str]) -> str:
        """The text a run of pieces spells (SQuAD answers from predicted pieces)."""
        return "".join(pieces).replace(WORD_START, " ").strip()

    def encode_batch(self, texts: Sequence[str | bytes]) -> list[list[int]]:
        """Ids of each text (no [CLS]/[SEP]); sentencepiece encodes the batch in threads."""
        prepared = [preprocess_text(t, self.do_lower_case, self.keep_accents) for t in texts]
        batch = self.sp.Encode(prepared, out_type=str, num_threads=os.cpu_count() or 1)
        piece_to_id = self.sp.PieceToId
        return [[piece_to_id(p) for p in self._fix_number_comma(pieces)] for pieces in batch]

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        # As ALBERT: a piece outside the model maps to the unknown id.
        return [self.sp.PieceToId(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        try:
            return [self.inv_vocab[int(i)] for i in ids]
        except KeyError as e:
            raise BertJaxError(
                f"{self.model_file}: id {e.args[0]} is outside the vocab (size {len(self.vocab)})"
            ) from None


class XLNetTokenizer(SentencePieceTokenizer):
    """XLNet's spiece.model: XLNetTokenizer's preprocessing (that of ALBERT, cased by default)
    and its special pieces <cls>, <sep>, <pad>, <unk>."""

    layout = layout_lib.XLNET

    def __init__(self, model_file: str | os.PathLike, do_lower_case: bool = False):
        super().__init__(model_file, do_lower_case=do_lower_case)
        for special in ("<cls>", "<sep>", "<pad>", "<unk>"):
            if special not in self.vocab:
                raise BertJaxError(f"{model_file}: no {special} piece (not an XLNet spiece.model)")
