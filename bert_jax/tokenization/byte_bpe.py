"""`ByteBpeTokenizer`: RoBERTa's byte-level BPE behind the FullTokenizer interface, run by
`tokenizers`.

    tok = ByteBpeTokenizer("roberta-dir/vocab.json")   # merges.txt beside it
    tok = ByteBpeTokenizer("roberta-dir/tokenizer.json")
    tok = ByteBpeTokenizer("roberta-dir/")               # whichever of the two it holds

As RobertaTokenizerFast (GPT-2's scheme): no normalisation, no lower-casing; GPT-2's regex splits
the text, each piece's UTF-8 bytes are mapped to printable characters (a leading space becomes
"Ġ"), then BPE merges in merges.txt order; every byte is in the alphabet, so nothing is unknown.
The special tokens `<s> </s> <pad> <unk> <mask>` are matched whole in the text, as
transformers' RobertaTokenizer(Fast) does. Files are read through etils.epath (local or
gs://). Fine-tuning sequences use `layout` (`<s> A </s></s> B </s>`, see layout.py).
"""

from __future__ import annotations

import json
import os

from etils import epath
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from bert_jax import file_set
from bert_jax.errors import BertJaxError
from bert_jax.tokenization import layout as layout_lib
from bert_jax.tokenization.tokenizers_backed import TokenizersBacked

SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")  # RoBERTa's ids 0 1 2 3 (mask last)
# ModernBERT's byte-level BPE (OLMo's) names its specials as BERT does, in the same roles.
BERT_STYLE_SPECIALS = ("[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]")
VOCAB, MERGES, TOKENIZER_JSON = "vocab.json", "merges.txt", "tokenizer.json"


def find_files(directory: str | os.PathLike) -> epath.Path | None:
    """The byte-level BPE file of a checkpoint directory: vocab.json (with merges.txt), else
    tokenizer.json whose model is BPE; None when it has neither."""
    d = epath.Path(directory)
    if (d / VOCAB).exists() and (d / MERGES).exists():
        return d / VOCAB
    if (d / TOKENIZER_JSON).exists():
        try:
            model = json.loads((d / TOKENIZER_JSON).read_text()).get("model") or {}
        except (OSError, json.JSONDecodeError, AttributeError):
            return None
        if model.get("type") == "BPE":
            return d / TOKENIZER_JSON
    return None


def file_set_of(path: str | os.PathLike) -> dict[str, epath.Path]:
    """The files a byte-level BPE is made of, by the name they keep in a checkpoint directory:
    vocab.json + the merges.txt beside it, or the tokenizer.json alone."""
    p = epath.Path(path)
    if p.name == TOKENIZER_JSON or p.name.endswith(".tokenizer.json"):
        return {TOKENIZER_JSON: p}
    return {VOCAB: p, MERGES: p.parent / MERGES}


def is_byte_bpe_file(path: str | os.PathLike) -> bool:
    """A vocab.json / tokenizer.json (byte-level BPE) rather than a vocab.txt / spm model."""
    return epath.Path(path).name.endswith(".json")


def _read(path: epath.Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise BertJaxError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise BertJaxError(f"{path}: is a directory, expected the {what}") from None


def read_merges(path: epath.Path) -> list[tuple[str, str]]:
    """merges.txt: an optional `#version` line, then one `left right` pair per line."""
    merges = []
    text = _read(path, "merges file").decode("utf-8")
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line or (lineno == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise BertJaxError(f"{path}: line {lineno}: expected `left right`, got {line!r}")
        merges.append((parts[0], parts[1]))
    return merges


def build_backend(vocab: dict[str, int], merges: list[tuple[str, str]]) -> Tokenizer:
    """A `tokenizers.Tokenizer` tokenizing as RobertaTokenizerFast (no post-processing)."""
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def _load_backend(path: epath.Path) -> Tokenizer:
    if path.name == TOKENIZER_JSON or path.name.endswith(".tokenizer.json"):
        try:
            tok = Tokenizer.from_str(_read(path, "tokenizer file").decode("utf-8"))
        except Exception as e:  # tokenizers raises a bare Exception on a malformed file
            raise BertJaxError(f"{path}: not a tokenizers JSON file ({e})") from None
        tok.post_processor = None  # the tasks place <s> </s> themselves
        tok.no_truncation()
        tok.no_padding()
        return tok
    try:
        vocab = json.loads(_read(path, "vocab file"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BertJaxError(f"{path}: not a JSON vocab ({e})") from None
    if not isinstance(vocab, dict) or not all(isinstance(v, int) for v in vocab.values()):
        raise BertJaxError(f"{path}: expected a JSON object token -> id")
    merges_path = path.parent / MERGES
    if not merges_path.exists():
        raise BertJaxError(f"{path}: no {MERGES} beside it (byte-level BPE needs both)")
    return build_backend(vocab, read_merges(merges_path))


class ByteBpeTokenizer(TokenizersBacked):
    """Byte-level BPE (RoBERTa): tokenize / encode / encode_batch / convert_* / vocab / inv_vocab,
    as FullTokenizer, with the ids of `<s> </s> <pad> <unk> <mask>`."""

    layout = layout_lib.ROBERTA  # or MODERNBERT's, by the special tokens the vocab has
    do_lower_case = False  # byte-level BPE is cased: it never changes the text

    def __init__(self, path: str | os.PathLike):
        p = epath.Path(path)
        if p.is_dir():
            found = find_files(p)
            if found is None:
                raise BertJaxError(f"{p}: holds neither {VOCAB} + {MERGES} nor {TOKENIZER_JSON}")
            p = found
        file_set.finish_publish(p.parent)  # a build-vocab killed mid-publish: complete its set
        self.vocab_file = str(p)
        self.backend = _load_backend(p)
        vocab = self.backend.get_vocab(with_added_tokens=True)
        specials, self.layout = _specials_of(vocab, p)
        # As RobertaTokenizerFast: the special tokens are matched whole in the text (a
        # tokenizer.json keeps its own settings for those it lists, e.g. <mask>'s lstrip).
        listed = {t.content for t in self.backend.get_added_tokens_decoder().values()}
        self.backend.add_special_tokens(
            [
                AddedToken(t, normalized=False, special=True) for t in specials if t not in listed
            ]  # fmt: skip
        )
        self._set_vocab(vocab)
        self.cls_id, self.pad_id, self.sep_id, self.unk_id, self.mask_id = (
            vocab[t] for t in specials
        )


def _specials_of(vocab: dict[str, int], path: epath.Path) -> tuple[tuple[str, ...], object]:
    """The special tokens (cls, pad, sep, unk, mask) and layout of a byte-level BPE vocab:
    RoBERTa's `<s>`... or ModernBERT's `[CLS]`..."""
    for specials, layout in (
        (SPECIAL_TOKENS, layout_lib.ROBERTA),
        (BERT_STYLE_SPECIALS, layout_lib.MODERNBERT),
    ):
        if all(t in vocab for t in specials):
            return specials, layout
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    raise BertJaxError(
        f"{path}: vocab lacks {', '.join(missing)}; a byte-level BPE vocab needs RoBERTa's "
        f"{', '.join(SPECIAL_TOKENS)} or ModernBERT's {', '.join(BERT_STYLE_SPECIALS)}"
    )
