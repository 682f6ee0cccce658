"""CoNLL-2003 NER: the column format, first-sub-token labels, entity-level F1 with seqeval.

File format: one token per line, whitespace-separated columns with the word first and the NER tag
last (CoNLL-2003 has `word POS chunk NER`); blank lines end sentences; `-DOCSTART-` lines separate
documents and are dropped. A line with fewer than two columns, or a tag outside the label set, is
an error naming the file and line.

Features: each word is tokenised on its own (byte-level BPE: with a leading space, as transformers'
RoBERTa scripts do), framed by the tokenizer's layout (`[CLS] pieces [SEP]`); its label sits on its
first piece (label_weights 1), other pieces get weight 0. A sentence whose pieces exceed
`max_seq_length - 2` is split at word boundaries into several windows (counted in `chunks`), so no
word is lost; predictions are put back together per sentence before scoring.
"""

from __future__ import annotations

import dataclasses
import io

import numpy as np
from seqeval import metrics as sq
from seqeval.scheme import IOB2

from bert_jax.atomic_write import write_text_atomic
from bert_jax.errors import BertJaxError
from bert_jax.tasks.text_files import read_utf8
from bert_jax.tasks.text_pairs import Tokenizer
from bert_jax.tokenization.layout import layout_of

LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")


@dataclasses.dataclass(frozen=True)
class Sentence:
    words: tuple[str, ...]
    tags: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Window:
    sentence: int
    first_word: int
    num_words: int
    word_starts: tuple[int, ...]  # piece position of each word's first piece


def read_conll(path: str, labels: tuple[str, ...] = LABELS) -> list[Sentence]:
    sentences, words, tags = [], [], []
    with io.StringIO(read_utf8(path), newline=None) as f:  # local or gs://
        for lineno, line in enumerate(f, start=1):
            cols = line.split()
            if not cols or cols[0] == "-DOCSTART-":
                if words:
                    sentences.append(Sentence(tuple(words), tuple(tags)))
                    words, tags = [], []
                continue
            if len(cols) < 2:
                raise BertJaxError(
                    f"{path}: line {lineno}: expected `word ... TAG` columns, got {line.strip()!r}"
                )
            if cols[-1] not in labels:
                raise BertJaxError(
                    f"{path}: line {lineno}: tag {cols[-1]!r} not in the label set {list(labels)}"
                )
            words.append(cols[0])
            tags.append(cols[-1])
    if words:
        sentences.append(Sentence(tuple(words), tuple(tags)))
    return sentences


def read_tfds(split: str, data_dir: str | None = None) -> list[Sentence]:
    """tfds `conll2003` (splits train/dev/test), tags by the dataset's ClassLabel names."""
    import tensorflow_datasets as tfds

    ds, info = tfds.load("conll2003", split=split, data_dir=data_dir, with_info=True)
    names = info.features["ner"].feature.names
    out = []
    for ex in tfds.as_numpy(ds):
        words = tuple(w.decode("utf-8") for w in ex["tokens"])
        out.append(Sentence(words, tuple(names[int(t)] for t in ex["ner"])))
    return out


def featurize(
    sentences: list[Sentence],
    tokenizer: Tokenizer,
    max_seq_length: int,
    labels: tuple[str, ...] = LABELS,
) -> tuple[dict[str, np.ndarray], list[Window]]:
    ids_rows, label_rows, weight_rows, windows = [], [], [], []
    room = max_seq_length - 2
    layout = layout_of(tokenizer)
    for si, sent in enumerate(sentences):
        pieces = [tokenizer.tokenize(layout.word_prefix + w) or [layout.unk] for w in sent.words]
        start = 0
        while start < len(sent.words):
            toks, lab, wts, starts, end = [layout.cls], [0], [0.0], [], start
            while end < len(sent.words) and len(toks) - 1 + len(pieces[end]) <= room:
                starts.append(len(toks))
                toks += pieces[end]
                lab += [labels.index(sent.tags[end])] + [0] * (len(pieces[end]) - 1)
                wts += [1.0] + [0.0] * (len(pieces[end]) - 1)
                end += 1
            if end == start:  # one word longer than the window: keep its first pieces
                starts.append(1)
                toks += pieces[end][:room]
                lab += [labels.index(sent.tags[end])] + [0] * (len(toks) - 2)
                wts += [1.0] + [0.0] * (len(toks) - 2)
                end += 1
            toks.append(layout.sep)
            lab.append(0)
            wts.append(0.0)
            ids_rows.append(tokenizer.convert_tokens_to_ids(toks))
            label_rows.append(lab)
            weight_rows.append(wts)
            windows.append(Window(si, start, end - start, tuple(starts)))
            start = end
    n = len(windows)
    arrays = {
        "input_ids": np.full((n, max_seq_length), layout.pad_id(tokenizer.vocab), np.int32),
        "input_mask": np.zeros((n, max_seq_length), np.int32),
        "segment_ids": np.zeros((n, max_seq_length), np.int32),
        "labels": np.zeros((n, max_seq_length), np.int32),
        "label_weights": np.zeros((n, max_seq_length), np.float32),
    }
    for i, (ids, lab, wts) in enumerate(zip(ids_rows, label_rows, weight_rows, strict=True)):
        arrays["input_ids"][i, : len(ids)] = ids
        arrays["input_mask"][i, : len(ids)] = 1
        arrays["labels"][i, : len(lab)] = lab
        arrays["label_weights"][i, : len(wts)] = wts
    return arrays, windows


def word_predictions(
    sentences: list[Sentence],
    windows: list[Window],
    pred_ids_NxL: np.ndarray,
    labels: tuple[str, ...] = LABELS,
) -> list[list[str]]:
    """Per-piece predicted ids -> per-word tags (the first piece's), sentence by sentence."""
    out = [["O"] * len(s.words) for s in sentences]
    for win, row in zip(windows, pred_ids_NxL, strict=True):
        for k, pos in enumerate(win.word_starts):
            out[win.sentence][win.first_word + k] = labels[int(row[pos])]
    return out


def entity_f1(
    gold: list[list[str]], pred: list[list[str]], strict: bool = False
) -> dict[str, float]:
    """Micro entity-level scores. Default mode = conlleval; strict = IOB2 well-formed spans only."""
    kw = {"mode": "strict", "scheme": IOB2} if strict else {}
    return {
        "f1": float(sq.f1_score(gold, pred, **kw)),
        "precision": float(sq.precision_score(gold, pred, **kw)),
        "recall": float(sq.recall_score(gold, pred, **kw)),
        "token_accuracy": float(sq.accuracy_score(gold, pred)),
    }


def write_predictions(sentences: list[Sentence], pred: list[list[str]], path: str) -> None:
    """CoNLL columns `word gold predicted`, blank line between sentences (conlleval's input)."""
    lines = []
    for sent, tags in zip(sentences, pred, strict=True):
        lines += [f"{w} {g} {p}" for w, g, p in zip(sent.words, sent.tags, tags, strict=True)]
        lines.append("")
    write_text_atomic(path, "".join(line + "\n" for line in lines))
