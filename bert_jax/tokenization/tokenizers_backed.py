"""`TokenizersBacked`: the FullTokenizer interface over a `tokenizers.Tokenizer` (`self.backend`),
shared by the tokenizers it runs as they are (byte-level BPE, a tokenizer.json)."""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable, Sequence

from bert_jax.tokenization.lookups import VocabLookups

_SURROGATE = re.compile("[\ud800-\udfff]")


class TokenizersBacked(VocabLookups):
    backend: object  # tokenizers.Tokenizer without post-processor, truncation or padding

    def _set_vocab(self, vocab: dict[str, int]) -> None:
        self.vocab = collections.OrderedDict(sorted(vocab.items(), key=lambda kv: kv[1]))
        self.inv_vocab = {i: t for t, i in self.vocab.items()}

    def __len__(self) -> int:
        return len(self.vocab)

    @staticmethod
    def _text(text: str | bytes) -> str:
        if isinstance(text, bytes):
            return text.decode("utf-8", errors="ignore")
        # `tokenizers` accepts only valid Unicode; a lone surrogate is what U+FFFD replaces.
        return _SURROGATE.sub("\ufffd", text)

    def encode(self, text: str | bytes) -> list[int]:
        """Token ids (no special tokens)."""
        return self.backend.encode(self._text(text), add_special_tokens=False).ids

    def tokenize(self, text: str | bytes) -> list[str]:
        # By id: an Encoding's token for <mask> includes the space lstrip took with it.
        return self.convert_ids_to_tokens(self.encode(text))

    def encode_batch(self, texts: Sequence[str | bytes]) -> list[list[int]]:
        """Token ids of each text (no special tokens); runs in parallel in Rust."""
        inputs = [self._text(t) for t in texts]
        return [e.ids for e in self.backend.encode_batch_fast(inputs, add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=False)

    def pieces_to_text(self, pieces: Sequence[str]) -> str:
        """The text a run of pieces spells (SQuAD answers from predicted pieces)."""
        return self.decode(self.convert_tokens_to_ids(pieces)).strip()
