"""T5's vocabulary: a sentencepiece model with pad=0, eos=1, unk=2 (T5's layout), plus `extra_ids`
sentinel ids above the model's pieces, `<extra_id_0>` = vocab_size - 1 counting down (as T5's
`SentencePieceVocabulary` and transformers' T5Tokenizer number them). A Unigram tokenizer.json
(what transformers v5 saves for T5, without spiece.model) is read as well: its pieces run through
`tokenizers` and its sentinels keep the ids the file gives them.

    vocab = T5Vocab("spiece.model")            # extra_ids=100
    vocab = T5Vocab("hf-dir/tokenizer.json")   # the file's <extra_id_N> tokens
    ids = vocab.encode("some text")            # pieces + [eos]
    vocab.sentinel(0), vocab.size, vocab.decode(ids)
    train_t5_spm(["corpus.txt"], "out/", vocab_size=2000)   # writes out/spiece.model
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Sequence

from etils import epath

from bert_jax.atomic_write import write_bytes_atomic
from bert_jax.errors import BertJaxError
from bert_jax.tokenization.sentencepiece_tokenizer import load_sentencepiece

PAD_ID, EOS_ID, UNK_ID = 0, 1, 2
_SENTINEL = re.compile(r"<extra_id_(\d+)>")
SPIECE, TOKENIZER_JSON = "spiece.model", "tokenizer.json"


def t5_tokenizer_in(directory: str | os.PathLike) -> epath.Path | None:
    """A T5 directory's tokenizer: spiece.model, else the tokenizer.json transformers v5 saves
    alone; None without either."""
    d = epath.Path(directory)
    return next((d / n for n in (SPIECE, TOKENIZER_JSON) if (d / n).exists()), None)


class _JsonPieces:
    """A Unigram tokenizer.json behind the few SentencePieceProcessor calls T5Vocab's users make
    (`vocab.sp`); its <extra_id_N> tokens are T5Vocab's sentinels, not pieces."""

    def __init__(self, path: epath.Path) -> None:
        from bert_jax.tokenization.json_tokenizer import load_backend

        # No post-processor: T5Vocab appends EOS itself.
        why = f"T5's tokenizer.json is a Unigram one (or give its {SPIECE})"
        _, self.backend = load_backend(path, ("Unigram",), why)
        vocab = self.backend.get_vocab(with_added_tokens=True)
        matches = {t: _SENTINEL.fullmatch(t) for t in vocab}
        self.sentinels = {int(m.group(1)): vocab[t] for t, m in matches.items() if m}
        self.size = max(vocab.values()) + 1
        # The pieces lie below every sentinel (T5's layout): a piece above one would be read as
        # a sentinel by `is_sentinel`.
        self.pieces = min(self.sentinels.values(), default=self.size)
        stray = sorted(t for t, m in matches.items() if not m and vocab[t] >= self.pieces)
        if stray:
            raise BertJaxError(
                f"{path}: token {stray[0]!r} has an id above an <extra_id_N>; T5's layout puts "
                "every piece below the sentinels"
            )
        self._pad, self._eos = vocab.get("<pad>", -1), vocab.get("</s>", -1)

    def pad_id(self) -> int:
        return self._pad

    def eos_id(self) -> int:
        return self._eos

    def GetPieceSize(self) -> int:  # noqa: N802 (SentencePieceProcessor's name)
        return self.pieces

    def EncodeAsIds(self, text: str | list[str]) -> list:  # noqa: N802
        """As sentencepiece's: a list of texts gives a list of id lists."""
        if isinstance(text, list):
            return [e.ids for e in self.backend.encode_batch(text, add_special_tokens=False)]
        return self.backend.encode(text, add_special_tokens=False).ids

    def DecodeIds(self, ids: Sequence[int]) -> str:  # noqa: N802
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=False)

    def IdToPiece(self, i: int) -> str:  # noqa: N802
        return self.backend.id_to_token(int(i))


class T5Vocab:
    def __init__(self, model_file: str | os.PathLike, extra_ids: int = 100) -> None:
        self.model_file = str(model_file)
        json_file = epath.Path(model_file).name.endswith(".json")
        sp = _JsonPieces(epath.Path(model_file)) if json_file else load_sentencepiece(model_file)
        self.sp = sp
        if (self.sp.pad_id(), self.sp.eos_id()) != (PAD_ID, EOS_ID):
            raise BertJaxError(
                f"{model_file}: pad/eos ids are {self.sp.pad_id()}/{self.sp.eos_id()}, T5 needs "
                f"{PAD_ID}/{EOS_ID} (train it with build-vocab --t5_spiece)"
            )
        self.pieces = self.sp.GetPieceSize()
        # sentinel number -> id: the file's own for a tokenizer.json, else counted down from the top
        self._sentinel_ids = self.sp.sentinels if json_file else None
        self.extra_ids = len(self._sentinel_ids) if json_file else extra_ids

    @classmethod
    def for_model(cls, model_file: str | os.PathLike, model_vocab_size: int) -> T5Vocab:
        """T5's 100 sentinels, fewer if the model's (padded) vocabulary has no room for them."""
        vocab = cls(model_file, extra_ids=0)
        if model_vocab_size < vocab.pieces:
            raise BertJaxError(f"{model_file}: {vocab.pieces} pieces, the model has only "
                               f"{model_vocab_size} embeddings")  # fmt: skip
        if vocab._sentinel_ids is None:
            vocab.extra_ids = min(100, model_vocab_size - vocab.pieces)
        elif vocab.sp.size > model_vocab_size:
            raise BertJaxError(
                f"{model_file}: ids up to {vocab.sp.size - 1} (its <extra_id_N> tokens), the model "
                f"has only {model_vocab_size} embeddings; give the model's own tokenizer"
            )
        return vocab

    @property
    def size(self) -> int:
        return self.pieces + self.extra_ids

    @property
    def eos_id(self) -> int:
        return EOS_ID

    @property
    def pad_id(self) -> int:
        return PAD_ID

    def sentinel(self, i: int) -> int:
        if not 0 <= i < self.extra_ids or (self._sentinel_ids and i not in self._sentinel_ids):
            raise BertJaxError(f"sentinel {i}: the vocab has {self.extra_ids} extra ids")
        return self.size - 1 - i if self._sentinel_ids is None else self._sentinel_ids[i]

    def sentinel_number(self, token_id: int) -> int:
        """N of the `<extra_id_N>` that `token_id` is (`is_sentinel(token_id)`)."""
        if self._sentinel_ids is None:
            return self.size - 1 - token_id
        return next((n for n, i in self._sentinel_ids.items() if i == token_id), -1)

    def is_sentinel(self, token_id: int) -> bool:
        return token_id >= self.pieces

    def encode(self, text: str, add_eos: bool = True) -> list[int]:
        """Text (which may hold `<extra_id_N>` markers) -> ids, with EOS appended."""
        ids: list[int] = []
        pos = 0
        for m in _SENTINEL.finditer(text):
            before = text[pos : m.start()]
            ids += self.sp.EncodeAsIds(before) if before.strip() else []
            ids.append(self.sentinel(int(m.group(1))))
            pos = m.end()
        if text[pos:].strip() or not ids:
            ids += self.sp.EncodeAsIds(text[pos:])
        return ids + [EOS_ID] if add_eos else ids

    def decode(self, ids: Sequence[int]) -> str:
        """Ids -> text, stopping at EOS, dropping padding; sentinels as `<extra_id_N>`."""
        parts: list[str] = []
        run: list[int] = []
        for t in ids:
            t = int(t)
            if t == EOS_ID:
                break
            if t == PAD_ID:
                continue
            if self.is_sentinel(t):
                parts.append(self.sp.DecodeIds(run))
                parts.append(f"<extra_id_{self.sentinel_number(t)}>")
                run = []
            else:
                run.append(t)
        parts.append(self.sp.DecodeIds(run))
        return " ".join(p for p in parts if p).strip()


def train_t5_spm(
    lines: Iterable[str],
    output_dir: str | os.PathLike,
    vocab_size: int,
    model_type: str = "unigram",
    seed: int = 0,
) -> epath.Path:
    """Train a T5-layout sentencepiece model (pad 0, eos 1, unk 2, no bos) on `lines`; writes
    `spiece.model` (transformers' file name) into `output_dir` and returns its path."""
    data = train_t5_spm_bytes(lines, vocab_size, model_type, seed)
    return write_t5_spm(output_dir, data)


def train_t5_spm_bytes(
    lines: Iterable[str], vocab_size: int, model_type: str = "unigram", seed: int = 0,
    flag: str = "vocab_size",
) -> bytes:  # fmt: skip
    """The trained model's bytes, written nowhere. A corpus too small for `vocab_size` pieces is
    refused, naming the size it gives (sentencepiece's soft limit returned, say, 97 pieces for
    2,000 without a word), so nothing is written from such a run."""
    import sentencepiece as spm

    if vocab_size < 4:  # pad, eos, unk and one piece
        raise BertJaxError(f"--{flag}={vocab_size}: must be >= 4")
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "corpus.txt")
        with open(text, "w", encoding="utf-8") as f:
            for line in lines:
                if line.strip():
                    f.write(line.strip() + "\n")
        spm.set_random_generator_seed(seed)
        try:
            spm.SentencePieceTrainer.Train(
                input=text, model_prefix=os.path.join(tmp, "spiece"), vocab_size=vocab_size,
                model_type=model_type, character_coverage=1.0, pad_id=PAD_ID, eos_id=EOS_ID,
                unk_id=UNK_ID, bos_id=-1, hard_vocab_limit=False, minloglevel=2, num_threads=2,
            )  # fmt: skip
        except RuntimeError as e:
            raise BertJaxError(f"sentencepiece training failed: {e}") from None
        with open(os.path.join(tmp, "spiece.model"), "rb") as f:
            data = f.read()
    model = spm.SentencePieceProcessor()
    model.LoadFromSerializedProto(data)
    pieces = model.GetPieceSize()
    if pieces < vocab_size:
        raise BertJaxError(
            f"--{flag}={vocab_size}: the text gives only {pieces} sentencepiece pieces (nothing "
            f"written); use --{flag}={pieces} or less, or more text"
        )
    return data


def write_t5_spm(output_dir: str | os.PathLike, data: bytes) -> epath.Path:
    """`output_dir`/spiece.model, written whole or not at all."""
    out = epath.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(out / "spiece.model", data)
    return out / "spiece.model"


def t5_spiece_from_files(
    input_files: str, output_dir: str | os.PathLike, pieces: int
) -> epath.Path:
    """`train_t5_spm` over build-vocab's inputs (globs or `embedded:[N]`), one line a sentence."""
    return write_t5_spm(output_dir, t5_spiece_model(input_files, pieces))


def t5_spiece_model(input_files: str, pieces: int) -> bytes:
    """`--t5_spiece_size`'s model over build-vocab's inputs, in memory: build-vocab trains it
    before writing its other files, so a refusal leaves an earlier vocabulary whole."""
    from bert_jax.tokenization.vocab_builder import _corpus_lines, check_input

    check_input(input_files)
    return train_t5_spm_bytes(_corpus_lines(input_files), pieces, flag="t5_spiece_size")
