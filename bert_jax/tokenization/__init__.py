"""Tokenizers: reference-compatible WordPiece (`FullTokenizer`), ALBERT-style SentencePiece
(`SentencePieceTokenizer`), RoBERTa's byte-level BPE (`ByteBpeTokenizer`), and vocab training
(`build_vocab`, command `bert-jax build-vocab`)."""

from bert_jax.tokenization.byte_bpe import ByteBpeTokenizer
from bert_jax.tokenization.sentencepiece_tokenizer import SentencePieceTokenizer
from bert_jax.tokenization.vocab import SPECIAL_TOKENS, SpecialIds, load_vocab, special_ids
from bert_jax.tokenization.vocab_builder import build_vocab
from bert_jax.tokenization.wordpiece import BasicTokenizer, FullTokenizer, WordpieceTokenizer

__all__ = [
    "SPECIAL_TOKENS",
    "BasicTokenizer",
    "ByteBpeTokenizer",
    "FullTokenizer",
    "SentencePieceTokenizer",
    "SpecialIds",
    "build_vocab",
    "load_vocab",
    "special_ids",
    "WordpieceTokenizer",
]
