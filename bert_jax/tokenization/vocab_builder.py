"""Train a vocab with sentencepiece: a WordPiece vocab.txt for FullTokenizer and an spm model.

    build_vocab("wiki-*.txt", vocab_size=30522, output_dir="vocab/", do_lower_case=True)

1. Every line of the corpus goes through FullTokenizer's BasicTokenizer (clean text, lower-case
   and strip accents when do_lower_case, split off punctuation and CJK), so the pieces are learnt
   in exactly the alphabet WordPiece will later see.
2. sentencepiece (BPE by default: it reaches the requested size on small corpora, where unigram
   may stop short) learns pieces on that text with identity normalisation and full character
   coverage. A second model is trained the same way on the raw lines after ALBERT's
   preprocessing (with sentencepiece's default NFKC rule) and written as spm.model + spm.vocab
   for ALBERT-style tokenization (SentencePieceTokenizer). Both have [PAD]=0 and [UNK]=1, and
   [CLS] [SEP] [MASK] as control symbols (never matched in raw text).
3. vocab.txt: [PAD] [UNK] [CLS] [SEP] [MASK], then [unused0..N-1], then every character of the
   corpus (bare and, for characters that can be inside a word, as `##c`) so WordPiece never
   fails on training text, then the learnt pieces in sentencepiece's order: a word-initial piece
   (leading ▁) bare, any other as `##piece`, until vocab_size entries. If the corpus yields fewer
   pieces, more [unusedK] entries fill the vocab to exactly vocab_size (with a warning). A
   vocab_size that would be more than a quarter fillers is refused with the size the corpus
   supports: before training when BPE's bound on the pieces rules it out, else before anything
   is written.
4. The [UNK] rate of FullTokenizer(vocab.txt) on the corpus is measured and written, with the
   other numbers, to vocab_stats.json.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import pathlib
import tempfile
import time
from collections.abc import Iterator

from absl import logging
from etils import epath

from bert_jax import file_set
from bert_jax.atomic_write import is_local
from bert_jax.corpus import sources
from bert_jax.errors import BertJaxError
from bert_jax.tokenization.sentencepiece_tokenizer import preprocess_text
from bert_jax.tokenization.vocab import SPECIAL_TOKENS
from bert_jax.tokenization.wordpiece import BasicTokenizer, FullTokenizer

WORD_START = "\u2581"
_CONTROL = ("[CLS]", "[SEP]", "[MASK]")
_UNK_SAMPLE_LINES = 200_000


def _corpus_lines(input_files: str | list[str]) -> Iterator[str]:
    stats = sources.DecodeStats()
    for source in sources.resolve_inputs(input_files):  # checked by check_input first
        for _, block in sources.source_blocks(source, 1 << 22):
            for line in sources.decode_lines(block, 0, stats):
                if line:
                    yield line


def check_input(input_files: str | list[str]) -> None:
    """Refuse, before any work, input that is not UTF-8 text (binary data, UTF-16, Latin-1):
    decoded with replacement characters it would train a vocab of noise."""
    sources.check_text(sources.resolve_inputs(input_files))


def _bpe_piece_bound(word_chars: int, chars: int, reserved: int, split_chars: int) -> int:
    """The most vocab.txt entries BPE can yield: the reserved tokens, every character bare and
    (unless it always stands alone) as ##c, and at most one piece per merge, where a word of n
    characters (n + 1 with sentencepiece's word-start mark) allows at most n merges."""
    return reserved + 2 * chars - split_chars + word_chars


def _train_spm(
    text_path: pathlib.Path,
    prefix: pathlib.Path,
    normalization: str,
    vocab_size: int,
    model_type: str,
    input_sentence_size: int,
    max_sentence_length: int,
    num_threads: int,
    seed: int,
):
    import sentencepiece as spm

    spm.set_random_generator_seed(seed)  # the sampling of input_sentence_size lines
    try:
        spm.SentencePieceTrainer.Train(
            input=str(text_path),
            model_prefix=str(prefix),
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=1.0,
            normalization_rule_name=normalization,
            split_by_whitespace=True,
            pad_id=0,
            pad_piece="[PAD]",
            unk_id=1,
            unk_piece="[UNK]",
            bos_id=-1,
            eos_id=-1,
            control_symbols=list(_CONTROL),
            hard_vocab_limit=False,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            max_sentence_length=max_sentence_length,
            num_threads=num_threads,
            minloglevel=2,
        )
    except RuntimeError as e:
        raise BertJaxError(f"sentencepiece training failed: {e}") from None
    return spm.SentencePieceProcessor(model_file=str(prefix) + ".model")


def build_vocab(
    input_files: str | list[str],
    vocab_size: int,
    output_dir: str | os.PathLike,
    do_lower_case: bool = True,
    num_unused: int = 0,
    model_type: str = "bpe",
    input_sentence_size: int = 1_000_000,
    num_threads: int | None = None,
    max_sentence_length: int = 16384,
    seed: int = 12345,
) -> dict:
    """Writes vocab.txt, spm.model, spm.vocab and vocab_stats.json into `output_dir`; returns the
    stats (vocab size, characters, corpus lines, [UNK] rate of FullTokenizer on the corpus)."""
    start = time.time()
    reserved = len(SPECIAL_TOKENS) + num_unused
    if vocab_size <= reserved:
        raise BertJaxError(f"--vocab_size={vocab_size}: must exceed the {reserved} special tokens")
    if model_type not in ("unigram", "bpe"):
        raise BertJaxError(f"--model_type={model_type}: expected unigram or bpe")
    check_input(input_files)
    out = epath.Path(output_dir)  # local or gs://
    try:  # before reading the corpus or training anything
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise BertJaxError(f"--output_dir={output_dir}: cannot write: {e.strerror or e}") from e

    # 1. BasicTokenizer over the corpus (for WordPiece) and ALBERT's preprocessing (for spm.model).
    basic = BasicTokenizer(do_lower_case)
    chars: collections.Counter[str] = collections.Counter()
    lines = 0
    sample: list[str] = []  # raw lines on which the [UNK] rate is measured
    # Distinct words and their characters: what bounds the pieces BPE can learn. Tracked only
    # until the bound passes vocab_size (then nothing is refused and the set may be dropped).
    words_seen: set[str] | None = set()
    word_chars = 0
    train = functools.partial(
        _train_spm,
        vocab_size=vocab_size,
        model_type=model_type,
        input_sentence_size=input_sentence_size,
        max_sentence_length=max_sentence_length,
        num_threads=num_threads or os.cpu_count() or 1,
        seed=seed,
    )
    if is_local(out):  # left by a killed run (a killed process cannot delete its own)
        for stale in out.glob(".build-vocab-*"):
            if stale.is_dir():
                stale.rmtree(missing_ok=True)
    file_set.recover(out, _OUTPUTS)
    prefix = ".build-vocab-"
    with tempfile.TemporaryDirectory(dir=out if is_local(out) else None, prefix=prefix) as tmp_dir:
        basic_path, albert_path = pathlib.Path(tmp_dir, "basic.txt"), pathlib.Path(tmp_dir, "a.txt")
        with (
            open(basic_path, "w", encoding="utf-8") as f,
            open(albert_path, "w", encoding="utf-8") as g,
        ):
            for line in _corpus_lines(input_files):
                words = basic.tokenize(line)
                if not words:
                    continue
                joined = " ".join(words)
                if words_seen is not None:
                    new = set(words) - words_seen
                    words_seen |= new
                    word_chars += sum(map(len, new))
                    if word_chars > vocab_size:
                        words_seen = None
                f.write(joined + "\n")
                g.write(preprocess_text(line, do_lower_case) + "\n")
                chars.update(joined)
                lines += 1
                if len(sample) < _UNK_SAMPLE_LINES:
                    sample.append(line)
        chars.pop(" ", None)
        if not lines:
            raise BertJaxError(f"--input_file={input_files}: no text in the input")
        split_chars = {c for c in chars if len(basic.tokenize(f"a{c}a")) > 1}
        if model_type == "bpe" and words_seen is not None:
            bound = _bpe_piece_bound(word_chars, len(chars), reserved, len(split_chars))
            if bound < vocab_size:
                raise BertJaxError(
                    f"--vocab_size={vocab_size}: the corpus supports at most {bound} entries "
                    f"({len(words_seen)} distinct words of {len(chars)} distinct characters); "
                    f"the rest would be [unused] fillers. Use --vocab_size={bound} or less, or "
                    "more text"
                )

        # 2. sentencepiece: pieces for WordPiece from the basic tokens (in exactly the alphabet
        # WordPiece sees); the ALBERT-style model from the preprocessed raw text.
        sp = train(basic_path, pathlib.Path(tmp_dir, "wp"), normalization="identity")
        pieces = [
            sp.IdToPiece(i)
            for i in range(sp.GetPieceSize())
            if not (sp.IsControl(i) or sp.IsUnknown(i) or sp.IsUnused(i))
        ]
        albert = train(albert_path, pathlib.Path(tmp_dir, "spm"), normalization="nmt_nfkc")
        # The output set is published together at the end, not file by file.
        outputs = {
            f"spm{x}": pathlib.Path(tmp_dir, "spm" + x).read_bytes() for x in (".model", ".vocab")
        }

    # 3. WordPiece vocab.
    tokens = [*SPECIAL_TOKENS, *(f"[unused{i}]" for i in range(num_unused))]
    by_count = [c for c, _ in chars.most_common()]
    char_tokens = by_count + [f"##{c}" for c in by_count if c not in split_chars]
    room = vocab_size - len(tokens)
    dropped_chars = max(0, len(char_tokens) - room)
    tokens += char_tokens[:room]
    seen = set(tokens)
    for piece in pieces:
        if len(tokens) >= vocab_size:
            break
        word = piece[1:] if piece.startswith(WORD_START) else "##" + piece
        if word in ("", "##") or word in seen or any(c.isspace() for c in word):
            continue
        tokens.append(word)
        seen.add(word)
    padding = vocab_size - len(tokens)
    if padding > vocab_size // 4:  # a vocab of fillers: refused before anything is written
        raise BertJaxError(
            f"--vocab_size={vocab_size}: the corpus yields {len(tokens)} entries, so {padding} of "
            f"the {vocab_size} would be [unused] fillers. Use --vocab_size={len(tokens)} or less, "
            "or more text"
        )
    if padding:
        logging.warning(
            "--vocab_size=%d: the corpus yields %d entries; %d [unused] fillers complete the vocab",
            vocab_size, len(tokens), padding,
        )  # fmt: skip
    tokens += [f"[unused{num_unused + i}]" for i in range(padding)]
    outputs["vocab.txt"] = "".join(t + "\n" for t in tokens).encode("utf-8")

    # 4. How often FullTokenizer falls back to [UNK] on the corpus (its first 200k lines).
    with tempfile.TemporaryDirectory() as tmp_dir:
        staged_vocab = pathlib.Path(tmp_dir, "vocab.txt")
        staged_vocab.write_bytes(outputs["vocab.txt"])
        tokenizer = FullTokenizer(staged_vocab, do_lower_case=do_lower_case)
    ids = tokenizer.encode_batch(sample)
    n_tokens = sum(map(len, ids))
    n_unk = sum(x.count(tokenizer.unk_id) for x in ids)
    stats = {
        "vocab_size": len(tokens),
        "requested_vocab_size": vocab_size,
        "spm_pieces": albert.GetPieceSize(),
        "model_type": model_type,
        "do_lower_case": do_lower_case,
        "num_unused": num_unused,
        "unused_added_for_small_corpus": padding,
        "corpus_lines": lines,
        "distinct_characters": len(chars),
        "character_tokens_left_out": dropped_chars,
        "unk_rate_lines_measured": len(sample),
        "unk_tokens": n_unk,
        "tokens": n_tokens,
        "unk_rate": n_unk / max(n_tokens, 1),
        "seconds": round(time.time() - start, 2),
    }
    outputs["vocab_stats.json"] = (json.dumps(stats, indent=2) + "\n").encode("utf-8")
    # One set (see file_set): a kill at any point leaves the old set or the new one, whole.
    file_set.publish(out, {name: outputs[name] for name in _OUTPUTS})
    return stats


_OUTPUTS = ("vocab.txt", "spm.model", "spm.vocab", "vocab_stats.json")
