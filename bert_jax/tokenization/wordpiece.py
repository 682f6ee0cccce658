"""`FullTokenizer`: google-research/bert's BasicTokenizer + WordPiece, run by `tokenizers` (Rust).

The reference API (`tokenize`, `convert_tokens_to_ids`, `convert_ids_to_tokens`, `vocab`,
`inv_vocab`) plus `encode_batch` for the data pipeline. The `tokenizers` pipeline is assembled so
that its output equals the reference's token for token under this Python (checked for every
assigned Unicode character): each character class is the reference's own, computed from Python's
unicodedata (see unicode_classes.py), rather than BertNormalizer/BertPreTokenizer's built-in ones,
which use older Unicode tables and also drop unassigned and private-use characters.

1. `_clean_text`: remove NUL, U+FFFD and Cc/Cf characters except tab, newline and CR.
2. with do_lower_case: Python's `str.lower()` (incl. final sigma), NFD, remove Mn characters.
3. split on whitespace; every punctuation character (ASCII symbols or Unicode P*) and every CJK
   ideograph becomes its own token.
4. greedy longest-match-first WordPiece with `##`; the whole word becomes [UNK] when a piece is
   missing or it has more than `max_input_chars_per_word` characters (200 as in
   google-research/bert; Hugging Face uses 100).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

from bert_jax.errors import BertJaxError
from bert_jax.tokenization import layout as layout_lib
from bert_jax.tokenization import unicode_classes
from bert_jax.tokenization.lookups import VocabLookups
from bert_jax.tokenization.vocab import load_vocab

UNK = "[UNK]"
_SURROGATE = re.compile("[\ud800-\udfff]")


def _as_text(text: str | bytes) -> str:
    # The reference's convert_to_unicode: bytes are UTF-8, undecodable bytes dropped.
    return text.decode("utf-8", errors="ignore") if isinstance(text, bytes) else text


def build_backend(
    vocab: dict[str, int], do_lower_case: bool, max_input_chars_per_word: int
) -> Tokenizer:
    """A `tokenizers.Tokenizer` tokenizing as the reference FullTokenizer (no special tokens)."""
    tables = unicode_classes.tables()
    steps = [normalizers.Replace(Regex(tables["dropped"]), "")]
    if do_lower_case:
        steps += [
            normalizers.Replace(Regex(unicode_classes.final_sigma_pattern()), "\u03c2"),
            normalizers.Lowercase(),
            normalizers.NFD(),
            normalizers.Replace(Regex(tables["nonspacing"]), ""),
        ]
    tok = Tokenizer(
        models.WordPiece(
            vocab=dict(vocab),
            unk_token=UNK,
            continuing_subword_prefix="##",
            max_input_chars_per_word=max_input_chars_per_word,
        )
    )
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Split(Regex(tables["split"]), "isolated"),
        ]
    )
    return tok


class BasicTokenizer:
    """The reference's BasicTokenizer: clean text, (lower-case + strip accents), split off
    punctuation and CJK characters; `tokenize(text) -> list[str]`."""

    def __init__(self, do_lower_case: bool = True):
        self.do_lower_case = do_lower_case
        backend = build_backend({UNK: 0}, do_lower_case, 200)
        self._normalize = backend.normalizer.normalize_str
        self._split = backend.pre_tokenizer.pre_tokenize_str

    def tokenize(self, text: str | bytes) -> list[str]:
        return [word for word, _ in self._split(self._normalize(_as_text(text)))]


class WordpieceTokenizer:
    """The reference's WordpieceTokenizer: whitespace split, then greedy longest-match-first
    pieces; `tokenize(text) -> list[str]` (text already basic-tokenized)."""

    def __init__(
        self, vocab: dict[str, int], unk_token: str = UNK, max_input_chars_per_word: int = 200
    ):
        self.vocab = vocab
        self._tok = Tokenizer(
            models.WordPiece(
                vocab=dict(vocab),
                unk_token=unk_token,
                continuing_subword_prefix="##",
                max_input_chars_per_word=max_input_chars_per_word,
            )
        )
        self._tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()

    def tokenize(self, text: str | bytes) -> list[str]:
        return self._tok.encode(_as_text(text), add_special_tokens=False).tokens


class FullTokenizer(VocabLookups):
    """Reference-compatible WordPiece tokenizer: `FullTokenizer(vocab_file, do_lower_case=True)`."""

    layout = layout_lib.BERT  # [CLS] A [SEP] B [SEP]

    def __init__(
        self,
        vocab_file: str | os.PathLike,
        do_lower_case: bool = True,
        max_input_chars_per_word: int = 200,
    ):
        self.vocab_file = str(vocab_file)
        self.vocab = load_vocab(vocab_file)
        if UNK not in self.vocab:
            raise BertJaxError(f"{vocab_file}: vocab lacks {UNK}, which WordPiece needs")
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        self.do_lower_case = do_lower_case
        self.max_input_chars_per_word = max_input_chars_per_word
        self.unk_id = self.vocab[UNK]
        self.backend = build_backend(self.vocab, do_lower_case, max_input_chars_per_word)
        # The reference's two stages, for code that uses them separately (e.g. SQuAD's
        # get_final_text uses the basic tokenizer alone).
        self.basic_tokenizer = BasicTokenizer(do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(
            self.vocab, max_input_chars_per_word=max_input_chars_per_word
        )

    def __len__(self) -> int:
        return len(self.vocab)

    @functools.cached_property
    def _unk_sentinel(self) -> str:
        """A private-use character in no vocab token: it behaves as a lone surrogate does in the
        reference (kept inside its word, which then becomes [UNK])."""
        used = set("".join(self.vocab))
        return next(chr(cp) for cp in range(0xF0000, 0x110000) if chr(cp) not in used)

    def _without_surrogates(self, text: str) -> str:
        # `tokenizers` accepts only valid Unicode; Python strings may hold lone surrogates.
        return _SURROGATE.sub(self._unk_sentinel, text)

    def tokenize(self, text: str | bytes) -> list[str]:
        return [self.inv_vocab[i] for i in self.encode(text)]

    def encode(self, text: str | bytes) -> list[int]:
        text = _as_text(text)
        try:
            return self.backend.encode(text, add_special_tokens=False).ids
        except TypeError:
            return self.backend.encode(self._without_surrogates(text), add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str | bytes]) -> list[list[int]]:
        """Token ids of each text (no [CLS]/[SEP]); runs in parallel in Rust."""
        inputs = [_as_text(t) for t in texts]
        try:
            encodings = self.backend.encode_batch_fast(inputs, add_special_tokens=False)
        except TypeError:
            inputs = [self._without_surrogates(t) for t in inputs]
            encodings = self.backend.encode_batch_fast(inputs, add_special_tokens=False)
        return [e.ids for e in encodings]



