"""Token <-> id lookups shared by the vocab-file tokenizers (WordPiece, byte-level BPE)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bert_jax.errors import BertJaxError


class VocabLookups:
    """Token <-> id lookups with one-line errors, for tokenizers that set `vocab` (token -> id),
    `inv_vocab` (id -> token) and `vocab_file`, and define `encode_batch`."""

    vocab: dict[str, int]
    inv_vocab: dict[int, str]
    vocab_file: str

    def tokenize_batch(self, texts: Sequence[str | bytes]) -> list[list[str]]:
        inv = self.inv_vocab
        return [[inv[i] for i in ids] for ids in self.encode_batch(texts)]  # type: ignore[attr-defined]

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        try:
            return [self.vocab[t] for t in tokens]
        except KeyError as e:
            raise BertJaxError(
                f"{self.vocab_file}: token {e.args[0]!r} is not in the vocab"
            ) from None

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        try:
            return [self.inv_vocab[int(i)] for i in ids]
        except KeyError as e:
            raise BertJaxError(
                f"{self.vocab_file}: id {e.args[0]} is outside the vocab (size {len(self.vocab)})"
            ) from None
