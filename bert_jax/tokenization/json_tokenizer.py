"""`JsonTokenizer`: a Hugging Face `tokenizer.json` (WordPiece or Unigram) run as it is by
`tokenizers`, behind the FullTokenizer interface.

transformers v5 saves BERT, ELECTRA and DistilBERT tokenizers as tokenizer.json alone (no
vocab.txt) and ALBERT's, XLNet's and T5's without spiece.model, so a directory it writes may hold
nothing else. The file's own normaliser and pre-tokeniser are kept (its lower-casing included:
`do_lower_case` reports it); its post-processor, truncation and padding are dropped, because the
tasks place the special tokens themselves (`layout`, chosen from the special tokens the
vocabulary holds: [CLS]/[SEP] as BERT and ALBERT, <cls>/<sep> as XLNet). Byte-level BPE files
(RoBERTa) are `ByteBpeTokenizer`'s.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from etils import epath
from tokenizers import Tokenizer

from bert_jax.errors import BertJaxError
from bert_jax.tokenization import layout as layout_lib
from bert_jax.tokenization.tokenizers_backed import TokenizersBacked

MODEL_TYPES = ("WordPiece", "Unigram")


def _lowercases(node: Any) -> bool:
    """Whether a normalizer (JSON) lower-cases: a Lowercase step or BertNormalizer(lowercase)."""
    if isinstance(node, dict):
        if node.get("type") == "Lowercase":
            return True
        if node.get("type") == "BertNormalizer" and node.get("lowercase"):
            return True
        return any(_lowercases(v) for v in node.values())
    if isinstance(node, list):
        return any(_lowercases(v) for v in node)
    return False


def read_tokenizer_json(path: epath.Path) -> dict:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BertJaxError(f"{path}: tokenizer file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BertJaxError(f"{path}: not a tokenizers JSON file ({e})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("model"), dict):
        raise BertJaxError(f"{path}: not a tokenizers JSON file (no model)")
    return raw


def load_backend(
    path: epath.Path, model_types: tuple[str, ...], why: str
) -> tuple[dict, Tokenizer]:
    """tokenizer.json at `path`: its JSON, and a tokenizers backend that adds nothing to the
    ids (no post-processor, truncation or padding: callers add their own specials). A model
    type not in `model_types` is refused, `why` saying which are read and why."""
    raw = read_tokenizer_json(path)
    model_type = raw["model"].get("type")
    if model_type not in model_types:
        raise BertJaxError(f"{path}: a {model_type} tokenizer; {why}")
    try:
        backend = Tokenizer.from_str(json.dumps(raw))
    except Exception as e:  # tokenizers raises a bare Exception on a malformed file
        raise BertJaxError(f"{path}: not a tokenizers JSON file ({e})") from None
    backend.post_processor = None
    backend.no_truncation()
    backend.no_padding()
    return raw, backend


class JsonTokenizer(TokenizersBacked):
    """`JsonTokenizer("dir/tokenizer.json")`: tokenize / encode / encode_batch / convert_* /
    vocab / inv_vocab / pieces_to_text, as FullTokenizer."""

    def __init__(self, path: str | os.PathLike):
        p = epath.Path(path)
        self.vocab_file = str(p)
        why = (f"tokenizer.json is read for {' and '.join(MODEL_TYPES)} models (byte-level "
               "BPE as RoBERTa's)")  # fmt: skip
        raw, self.backend = load_backend(p, MODEL_TYPES, why)
        model_type = raw["model"].get("type")
        self.do_lower_case = _lowercases(raw.get("normalizer"))
        vocab = self.backend.get_vocab(with_added_tokens=True)
        self._set_vocab(vocab)
        unk = raw["model"].get("unk_token")
        if model_type == "Unigram" and raw["model"].get("unk_id") is not None:
            unk = self.inv_vocab.get(int(raw["model"]["unk_id"]))
        self.layout = self._layout(p, unk)
        self.unk_id = self.vocab.get(self.layout.unk, 0)

    def _layout(self, p: epath.Path, unk: str | None) -> layout_lib.SpecialLayout:
        for base in (layout_lib.BERT, layout_lib.XLNET):
            if base.cls in self.vocab and base.sep in self.vocab:
                pad = next((t for t in ("[PAD]", "<pad>") if t in self.vocab), None)
                return dataclasses.replace(base, unk=unk or base.unk, pad=pad)
        raise BertJaxError(
            f"{p}: the vocabulary has neither [CLS] and [SEP] (BERT, ALBERT) nor <cls> and <sep> "
            "(XLNet)"
        )
