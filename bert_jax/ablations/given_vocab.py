"""`bert-jax ablate --vocab_file`: an existing vocab instead of one trained on the corpus.

A WordPiece vocab.txt (e.g. bert-base-uncased's) is used as it is; a sentencepiece model
(`.model`) becomes a WordPiece vocab: the five special tokens, then its pieces in its order, a
word-initial piece (leading U+2581) bare and any other as `##piece`, lower-cased (the workdir's
text is lower-cased before WordPiece), then every character of its pieces, bare and as `##c`,
that is not in yet, so WordPiece falls back to characters rather than [UNK].
"""

from __future__ import annotations

import hashlib

from etils import epath

from bert_jax.atomic_write import write_bytes_atomic, write_json_atomic
from bert_jax.errors import BertJaxError
from bert_jax.tokenization.vocab import SPECIAL_TOKENS

WORD_START = "\u2581"


def _is_sentencepiece(path: str) -> bool:
    return path.endswith(".model")


def _read(path: str) -> bytes:
    try:
        return epath.Path(path).read_bytes()
    except FileNotFoundError:
        raise BertJaxError(f"--vocab_file={path}: no such file") from None
    except IsADirectoryError:
        raise BertJaxError(f"--vocab_file={path}: a directory; give its vocab.txt") from None


def tokens(path: str) -> list[str]:
    """The WordPiece tokens `path` gives, in id order; refused by name if the special tokens
    are missing or the file is neither UTF-8 text nor a sentencepiece model."""
    return _tokens_of(_read(path), path)


def _tokens_of(data: bytes, path: str) -> list[str]:
    if _is_sentencepiece(path):
        return _from_sentencepiece(data, path)
    try:
        lines = [line.strip() for line in data.decode("utf-8").splitlines()]
    except UnicodeDecodeError as e:
        raise BertJaxError(
            f"--vocab_file={path}: not UTF-8 text (byte {e.start}); a WordPiece vocab.txt, or "
            "a sentencepiece model named *.model"
        ) from None
    missing = [t for t in SPECIAL_TOKENS if t not in lines]
    if missing:
        raise BertJaxError(
            f"--vocab_file={path}: no {', '.join(missing)} line; a WordPiece vocab.txt has "
            f"{', '.join(SPECIAL_TOKENS)}"
        )
    return lines


def _from_sentencepiece(data: bytes, path: str) -> list[str]:
    import sentencepiece as spm

    try:
        sp = spm.SentencePieceProcessor(model_proto=data)
    except RuntimeError as e:
        raise BertJaxError(f"--vocab_file={path}: not a sentencepiece model ({e})") from None
    out, seen, chars = list(SPECIAL_TOKENS), set(SPECIAL_TOKENS), {}
    for i in range(sp.GetPieceSize()):
        if sp.IsControl(i) or sp.IsUnknown(i) or sp.IsUnused(i):
            continue
        piece = sp.IdToPiece(i).lower()
        word = piece[1:] if piece.startswith(WORD_START) else "##" + piece
        chars.update(dict.fromkeys(piece.replace(WORD_START, "")))
        if word not in ("", "##") and word not in seen and not any(c.isspace() for c in word):
            out.append(word)
            seen.add(word)
    for c in chars:
        for token in (c, "##" + c):
            if token not in seen and not c.isspace():
                out.append(token)
                seen.add(token)
    return out


def check(path: str) -> None:
    tokens(path)


def fingerprint(path: str) -> str:
    """What settings.json records of a given vocab: its content's sha256, so the same vocab
    at another path is the same workdir and an edited one is refused."""
    return hashlib.sha256(_read(path)).hexdigest()


def install(path: str, out: epath.Path) -> None:
    """vocab.txt in `out`, then vocab_stats.json (the workdir's marker that the vocab is built);
    the file is read once."""
    data = _read(path)
    vocab = _tokens_of(data, path)
    out.mkdir(parents=True, exist_ok=True)
    text = "".join(t + "\n" for t in vocab).encode("utf-8") if _is_sentencepiece(path) else data
    write_bytes_atomic(out / "vocab.txt", text)
    stats = {"given": path, "sha256": hashlib.sha256(data).hexdigest(), "vocab_size": len(vocab),
             "from_sentencepiece": _is_sentencepiece(path)}  # fmt: skip
    write_json_atomic(out / "vocab_stats.json", stats, sort_keys=True)
