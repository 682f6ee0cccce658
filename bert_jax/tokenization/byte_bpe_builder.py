"""Train RoBERTa's byte-level BPE vocab with `tokenizers`: vocab.json + merges.txt.

    build_byte_bpe("wiki-*.txt", vocab_size=50265, output_dir="vocab/")
    # the same: bert-jax build-vocab --kind=byte_bpe

Every line of the corpus is split as ByteBpeTokenizer (and RobertaTokenizerFast) will split it:
GPT-2's regex, bytes mapped to printable characters, no lower-casing; the 256 byte characters are
the initial alphabet, so any text tokenizes without an unknown token. The special tokens
`<s> <pad> </s> <unk> <mask>` take ids 0-4. vocab.json, merges.txt and vocab_stats.json
(sizes, corpus lines, bytes per token on the corpus) are published as one set (file_set).
"""

from __future__ import annotations

import json
import os
import time

from etils import epath
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from bert_jax import file_set
from bert_jax.errors import BertJaxError
from bert_jax.tokenization.byte_bpe import MERGES, SPECIAL_TOKENS, VOCAB
from bert_jax.tokenization.vocab_builder import _corpus_lines, check_input

_OUTPUTS = (VOCAB, MERGES, "vocab_stats.json")
_STATS_LINES = 200_000  # lines on which bytes per token is measured


def build_byte_bpe(
    input_files: str | list[str],
    vocab_size: int,
    output_dir: str | os.PathLike,
    min_frequency: int = 2,
) -> dict:
    """Writes vocab.json, merges.txt and vocab_stats.json into `output_dir`; returns the stats."""
    start = time.time()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size <= len(SPECIAL_TOKENS) + len(alphabet):
        raise BertJaxError(
            f"--vocab_size={vocab_size}: byte-level BPE needs more than "
            f"{len(SPECIAL_TOKENS) + len(alphabet)} (5 special tokens + 256 bytes)"
        )
    check_input(input_files)  # not UTF-8 text: refused before the output dir is made
    out = epath.Path(output_dir)  # local or gs://
    try:  # before reading the corpus or training anything
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BertJaxError(f"--output_dir={output_dir}: cannot write: {e.strerror or e}") from e
    file_set.recover(out, _OUTPUTS)

    lines = list(_corpus_lines(input_files))
    if not lines:
        raise BertJaxError(f"--input_file={input_files}: no text in the input")
    tok = Tokenizer(models.BPE(fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer, length=len(lines))
    model = json.loads(tok.to_str())["model"]
    vocab: dict[str, int] = model["vocab"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    ordered = dict(sorted(vocab.items(), key=lambda kv: kv[1]))

    sample = lines[:_STATS_LINES]
    n_tokens = sum(len(e.ids) for e in tok.encode_batch_fast(sample, add_special_tokens=False))
    n_bytes = sum(len(line.encode("utf-8")) for line in sample)
    stats = {
        "kind": "byte_bpe",
        "vocab_size": len(ordered),
        "requested_vocab_size": vocab_size,
        "merges": len(merges),
        "min_frequency": min_frequency,
        "corpus_lines": len(lines),
        "lines_measured": len(sample),
        "tokens": n_tokens,
        "bytes_per_token": round(n_bytes / max(n_tokens, 1), 4),
        "seconds": round(time.time() - start, 2),
    }
    outputs = {
        VOCAB: json.dumps(ordered, ensure_ascii=False).encode("utf-8"),
        MERGES: ("#version: 0.2\n" + "".join(m + "\n" for m in merges)).encode("utf-8"),
        "vocab_stats.json": (json.dumps(stats, indent=2) + "\n").encode("utf-8"),
    }
    # One set (see file_set): a kill at any point leaves the old set or the new one, whole.
    file_set.publish(out, outputs)
    return stats
