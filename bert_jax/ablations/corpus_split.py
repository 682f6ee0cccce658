"""`bert-jax ablate --corpus`: the pretraining text and the held-out documents, streamed.

--corpus takes what create-pretraining-data's --input_file takes (bert_jax.corpus.sources):
files, globs, gs://, `tfds:NAME[:SPLIT][#FEATURE]`, `embedded[:N]`, comma-separated. Documents
(one sentence a line, a blank line between documents; those of one line are dropped) are read
one at a time, in two passes, so memory does not grow with the corpus:

1. each document's bytes are added to one of 2**16 buckets chosen by a hash of its text; the
   buckets' sizes fix how many of them are held out: the fewest whose documents reach the bytes
   the held-out text needs, and never more than a fifth of the corpus;
2. a document of a held-out bucket is written to held_out.txt (and its first bytes to
   eval.txt), any other to train.txt, up to `train_bytes` when that is given; the training
   documents of the next buckets, up to `vocab_bytes`, are also written to vocab_sample.txt,
   the bounded sample a vocab is trained on (none when every training document fits in it).

The held-out sample is thus spread over the whole corpus, the same whatever the order of its
files, and a document that occurs twice falls on one side only. split.json records the counts.
(The embedded default keeps the workdir's every-fifth-document rule: bert_jax.ablations.workdir.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np
from etils import epath

from bert_jax.atomic_write import open_atomic, write_bytes_atomic, write_json_atomic
from bert_jax.corpus import sources
from bert_jax.errors import BertJaxError

BUCKETS = 1 << 16
MAX_HELD_OUT_SHARE = 0.2  # the embedded default holds out one document in five
MIN_DOCUMENTS = 20
# A line longer than this is cut at a space into several (create-pretraining-data cuts at 100k
# characters anyway), so a file without newlines cannot fill memory.
LONG_LINE_BYTES = 1 << 20


def iter_documents(corpus: str) -> Iterator[list[str]]:
    """The documents of `corpus`, each a list of its stripped, non-empty lines. Text that is not
    UTF-8 is refused, naming the file and byte, rather than decoded with replacements."""
    for source in sources.resolve_inputs(corpus, flag="--corpus"):
        yield from _source_documents(source)


def _source_documents(source: sources.Source) -> Iterator[list[str]]:
    offset, pending, lines = 0, b"", []
    for chunk in source.iter_bytes():
        pending += chunk
        *complete, pending = pending.split(b"\n")
        while len(pending) > LONG_LINE_BYTES:  # a runaway line: cut at a space, bounded memory
            cut = pending.rfind(b" ", 0, LONG_LINE_BYTES)
            if cut <= 0:
                raise BertJaxError(
                    f"--corpus {_where(source)}: {LONG_LINE_BYTES} bytes without a newline or a "
                    f"space after byte {offset + sum(len(r) + 1 for r in complete)}: not text "
                    "in the one-sentence-a-line format"
                )
            complete.append(pending[:cut])
            pending = pending[cut + 1 :]
        for raw in complete:
            line = _decode(raw, source, offset)
            offset += len(raw) + 1
            if line:
                lines.append(line)
            elif lines:
                if len(lines) >= 2:
                    yield lines
                lines = []
    if pending.strip():
        lines.append(_decode(pending, source, offset))
    if len(lines) >= 2:
        yield lines


def _decode(raw: bytes, source: sources.Source, offset: int) -> str:
    try:
        return raw.decode("utf-8").strip()
    except UnicodeDecodeError as e:
        raise BertJaxError(f"--corpus {_where(source)}: not UTF-8 (byte {offset + e.start})"
                           ) from None  # fmt: skip


def _where(source: sources.Source) -> str:
    """A source as its errors name it: a file's path, else `kind:name`."""
    return source.name if source.kind == "file" else f"{source.kind}:{source.name}"


def _too_few(corpus: str, documents: int) -> BertJaxError:
    return BertJaxError(f"--corpus {corpus}: {documents} documents; need at least {MIN_DOCUMENTS}")


def check(corpus: str) -> None:
    """What --corpus names exists, is UTF-8 where read and has at least MIN_DOCUMENTS
    documents: read only until it is shown (a corpus of gigabytes is not read here)."""
    count = 0
    for _ in iter_documents(corpus):
        count += 1
        if count >= MIN_DOCUMENTS:
            return
    raise _too_few(corpus, count)


def _text(doc: list[str]) -> bytes:
    return ("\n".join(doc) + "\n").encode("utf-8")


def _bucket(text: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(text, digest_size=2).digest(), "big")


def buckets_reaching(
    bucket_bytes: np.ndarray, wanted_bytes: int, share: float = MAX_HELD_OUT_SHARE
) -> int:
    """How many buckets, from the first, are taken: the fewest that reach `wanted_bytes` or
    `share` of all the bytes, whichever is less."""
    want = min(wanted_bytes, int(bucket_bytes.sum() * share))
    return int(np.searchsorted(np.cumsum(bucket_bytes), want, side="left")) + 1


def split(
    corpus: str,
    data_dir: epath.Path,
    held_out_bytes: int,
    eval_bytes: int,
    train_bytes: int = 0,
    vocab_bytes: int = 0,
) -> dict:
    """Writes train.txt, held_out.txt, vocab_sample.txt (see above), split.json and, last,
    eval.txt into `data_dir`; returns split.json's record. `train_bytes` 0: every document not
    held out trains; `vocab_bytes` 0: no vocab sample."""
    bucket_bytes = np.zeros(BUCKETS, np.int64)
    documents = 0
    for doc in iter_documents(corpus):
        text = _text(doc)
        bucket_bytes[_bucket(text)] += len(text) + 1  # with the blank line after it
        documents += 1
    if documents < MIN_DOCUMENTS:
        raise _too_few(corpus, documents)
    cut = buckets_reaching(bucket_bytes, held_out_bytes)
    trains = bucket_bytes[cut:].sum() if not train_bytes else min(train_bytes, bucket_bytes.sum())
    vocab_end = cut  # buckets [cut, vocab_end) make the vocab sample
    if vocab_bytes and trains > vocab_bytes:
        vocab_end += buckets_reaching(bucket_bytes[cut:], vocab_bytes, share=1.0)
    counts = {k: [0, 0] for k in ("train", "held_out", "eval", "unused", "vocab_sample")}
    evaluation: list[bytes] = []  # eval.txt is written last: the split's completion marker
    with (
        open_atomic(data_dir / "train.txt", binary=True) as train,
        open_atomic(data_dir / "held_out.txt", binary=True) as held,
        open_atomic(data_dir / "vocab_sample.txt", binary=True) as sample,
    ):
        for doc in iter_documents(corpus):
            bucket = _bucket(_text(doc))
            text = _text(doc) + b"\n"  # with the blank line after it
            if bucket < cut:
                kept = ["held_out"]
                held.write(text)
                if counts["eval"][1] + len(text) <= eval_bytes or not evaluation:
                    kept.append("eval")
                    evaluation.append(text)
            elif not train_bytes or counts["train"][1] + len(text) <= train_bytes:
                kept = ["train"]
                train.write(text)
                if bucket < vocab_end:
                    kept.append("vocab_sample")
                    sample.write(text)
            else:
                kept = ["unused"]
            for name in kept:
                counts[name][0] += 1
                counts[name][1] += len(text)
    record = {
        "rule": f"held out: a document whose 16-bit blake2b hash is below {cut} (of {BUCKETS})",
        "documents": documents,
        "bytes": int(bucket_bytes.sum()),
        "held_out_wanted_bytes": held_out_bytes,
        "vocab_sample_wanted_bytes": vocab_bytes,
        "vocab_from": "vocab_sample.txt" if vocab_end > cut else "train.txt",
        **{f"{k}_documents": v[0] for k, v in counts.items()},
        **{f"{k}_bytes": v[1] for k, v in counts.items()},
    }
    write_json_atomic(data_dir / "split.json", record, sort_keys=True, indent=1)
    write_bytes_atomic(data_dir / "eval.txt", b"".join(evaluation))
    return record


def read_held_out(data_dir: epath.Path) -> list[list[str]]:
    """The held-out documents split() wrote (a bounded sample: what the suite is built from)."""
    text = (data_dir / "held_out.txt").read_text(encoding="utf-8")
    return [block.splitlines() for block in text.split("\n\n") if block.strip()]
