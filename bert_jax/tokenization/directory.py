"""The tokenizer of a checkpoint directory (Hugging Face dir, bert-jax workdir), whatever family
wrote it, and the checks every command makes on it.

    path = tokenizer_file_in("hf-dir/")        # vocab.txt, vocab.json, spiece.model, tokenizer.json
    tok = open_tokenizer(path, None, "--do_lower_case")
    check_vocab_fits(tok, config.vocab_size, "hf-dir/")

The first of these files a directory holds is its tokenizer: vocab.txt (WordPiece, the reference's
own tokenizer), vocab.json + merges.txt (RoBERTa's byte-level BPE), spiece.model (ALBERT's and
XLNet's sentencepiece model, tokenised as their original code does), tokenizer.json (what
transformers v5 saves alone: WordPiece and Unigram run as the file says, byte-level BPE as
RoBERTa's).
"""

from __future__ import annotations

import json
import os

from etils import epath

from bert_jax.errors import BertJaxError
from bert_jax.tokenization.byte_bpe import MERGES, TOKENIZER_JSON, VOCAB, ByteBpeTokenizer
from bert_jax.tokenization.byte_bpe import file_set_of as byte_bpe_file_set
from bert_jax.tokenization.json_tokenizer import JsonTokenizer, read_tokenizer_json
from bert_jax.tokenization.sentencepiece_tokenizer import SentencePieceTokenizer, XLNetTokenizer
from bert_jax.tokenization.wordpiece import FullTokenizer

SPIECE = "spiece.model"
TOKENIZER_CONFIG = "tokenizer_config.json"
LOOKED_FOR = f"vocab.txt, {VOCAB} + {MERGES}, {SPIECE} or {TOKENIZER_JSON}"


def tokenizer_file_in(directory: str | os.PathLike) -> epath.Path | None:
    """The tokenizer file of `directory` (see the module docstring), or None."""
    d = epath.Path(directory)
    if (d / "vocab.txt").exists():
        return d / "vocab.txt"
    if (d / VOCAB).exists() and (d / MERGES).exists():
        return d / VOCAB
    for name in (SPIECE, TOKENIZER_JSON):
        if (d / name).exists():
            return d / name
    return None


def tokenizer_kind(path: str | os.PathLike) -> str:
    """The kind of a tokenizer file: "wordpiece" (vocab.txt), "byte_bpe", "sentencepiece" (a
    .model) or "json" (a tokenizer.json of WordPiece or Unigram)."""
    p = epath.Path(path)
    if p.name.endswith(".model"):
        return "sentencepiece"
    if p.name == TOKENIZER_JSON or p.name.endswith(".tokenizer.json"):
        model = read_tokenizer_json(p)["model"]
        return "byte_bpe" if model.get("type") == "BPE" else "json"
    if p.name.endswith(".json"):
        return "byte_bpe"
    return "wordpiece"


def tokenizer_file_set(path: str | os.PathLike) -> dict[str, epath.Path]:
    """The files that make up the tokenizer of `path`, by the names they keep in a checkpoint
    directory (a workdir's copy, an export): a sentencepiece model keeps the (Unigram)
    tokenizer.json beside it and the other way round, a tokenizer.json its tokenizer_config.json."""
    p = epath.Path(path)
    kind = tokenizer_kind(p)
    if kind == "wordpiece":
        return {"vocab.txt": p}
    if kind == "byte_bpe":
        return byte_bpe_file_set(p)
    files = {SPIECE: p} if kind == "sentencepiece" else {TOKENIZER_JSON: p}
    spiece, json_file = p.parent / SPIECE, p.parent / TOKENIZER_JSON
    # The two spellings of one sentencepiece model: a tokenizer.json of another kind beside a
    # spiece.model (or a WordPiece one) is another tokenizer.
    unigram = json_file.exists() and read_tokenizer_json(json_file)["model"].get("type")
    unigram = unigram == "Unigram"
    if kind == "sentencepiece" and unigram:
        files[TOKENIZER_JSON] = json_file
    if kind == "json" and unigram and spiece.exists():
        files[SPIECE] = spiece
    if TOKENIZER_JSON in files and (p.parent / TOKENIZER_CONFIG).exists():
        files[TOKENIZER_CONFIG] = p.parent / TOKENIZER_CONFIG  # its class and special tokens
    return files


def open_tokenizer(
    path: str | os.PathLike,
    do_lower_case: bool | None,
    flag: str = "do_lower_case",
    default_lower: bool | None = None,
    keep_accents: bool = False,
):
    """The tokenizer of a tokenizer file. `do_lower_case` is what the user set (None: unset); a
    byte-level BPE or a tokenizer.json fixes its own casing, and a value that contradicts it is
    refused naming `flag`. Otherwise unset means `default_lower`, else True."""
    kind = tokenizer_kind(path)
    if kind in ("byte_bpe", "json"):
        tok = ByteBpeTokenizer(path) if kind == "byte_bpe" else JsonTokenizer(path)
        if do_lower_case is not None and do_lower_case != tok.do_lower_case:
            does = "lower-cases" if tok.do_lower_case else "never lower-cases"
            raise BertJaxError(
                f"{flag}={do_lower_case}: {path} {does} (its own rule); leave {flag} unset"
            )
        return tok
    lower = do_lower_case if do_lower_case is not None else default_lower
    lower = True if lower is None else lower
    if kind == "sentencepiece":
        keep_accents = keep_accents or bool(_saved_config(path).get("keep_accents"))
        return SentencePieceTokenizer(path, do_lower_case=lower, keep_accents=keep_accents)
    return FullTokenizer(str(path), do_lower_case=lower)


def _saved_config(path: str | os.PathLike) -> dict:
    """The tokenizer_config.json beside a tokenizer file ({} when none is readable)."""
    try:
        raw = json.loads((epath.Path(path).parent / TOKENIZER_CONFIG).read_text())
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def open_xlnet_tokenizer(
    path: str | os.PathLike, do_lower_case: bool | None, default_lower: bool | None = None
):
    """XLNet's tokenizer from its spiece.model (cased unless told) or its tokenizer.json, which
    must hold XLNet's <cls> and <sep>; `do_lower_case` as `open_tokenizer`."""
    p = epath.Path(path)
    if not p.exists():
        raise BertJaxError(f"{p}: no such file (XLNet's {SPIECE} or {TOKENIZER_JSON})")
    if tokenizer_kind(p) == "sentencepiece":
        lower = do_lower_case if do_lower_case is not None else default_lower
        return XLNetTokenizer(p, do_lower_case=bool(lower))
    tok = open_tokenizer(p, do_lower_case)
    if tok.layout.cls != "<cls>":
        raise BertJaxError(f"{p}: no <cls> and <sep> tokens (not an XLNet tokenizer)")
    return tok


def check_vocab_fits(tokenizer, vocab_size: int, source: str | os.PathLike) -> None:
    """Every id the tokenizer can give has an embedding row: a larger id would be clipped to the
    last row without a word (transformers refuses such a directory with an index error)."""
    n = max(tokenizer.vocab.values()) + 1
    if n > vocab_size:
        file = getattr(tokenizer, "vocab_file", None) or getattr(tokenizer, "model_file", "")
        raise BertJaxError(
            f"{source}: config vocab_size {vocab_size} is smaller than its tokenizer's {n} ids "
            f"({file}); the ids from {vocab_size} up have no embedding: fix vocab_size in "
            "config.json or give the model's own tokenizer"
        )
