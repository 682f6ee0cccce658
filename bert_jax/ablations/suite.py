"""The offline downstream suite: four tasks built from real English text (the embedded corpus's
held-out documents), one of each kind the paper fine-tunes on, written in the layouts the
fine-tuning tasks already read, so `bert-jax finetune` and the ablation harness use them as they
would use GLUE, CoNLL-2003 or SQuAD. The kinds keep the layouts' names; the tasks are these
(suite version 3):

  sst2   single sentence (SST-2 layout), word meaning: does every word belong (1), or was one
         content word swapped (0) for a word of another document with the same ending (its last
         two letters, so mostly the same part of speech: "arrays" -> "threads") and the same
         capitalisation and punctuation?  The sentence stays grammatical; only its meaning
         tells. Balanced classes; only sentences that have a word to swap are used.
  mrpc   sentence pair (MRPC layout), not next-sentence prediction: two sentences that share a
         content word; are they from the same document (1, never adjacent sentences) or from
         two documents (0)?  Like word-in-context: the shared word is in both, so only what
         surrounds it tells. Balanced classes.
  conll  token tagging (CoNLL layout): words replaced by a random word of the suite's vocabulary
         (drawn by corpus frequency) are tagged B-MISC, the rest O; 0, 1 or 2 per sentence.
         A replacement keeps the replaced word's capitalisation and trailing punctuation
         (version 2 dropped both: a replaced last word lost its period, a cue on its own).
  squad  span extraction (SQuAD v1.1 layout), a cloze whose answer stands to the left of the
         blank: the context is up to four sentences of a document ending with one whose word
         is replaced by "_" (at most 60 words), a word that also stands in the sentences
         before it and is not one of the documents' 100 most common words; the answers are
         its occurrences there. The question is the same for every example, so which word
         fills the blank can only be read from the blanked sentence, to the right of every
         answer: a left-to-right encoder scores each candidate before it has seen the blank.
         (Version 2 blanked the question, which precedes the context, so a left-to-right model
         saw everything it needed.)

Train and dev examples come from different documents. Everything is a function of the documents
and `seed` (Python's `random.Random`), so a suite is the same on every machine that yields the
same corpus text.
"""

from __future__ import annotations

import collections
import copy
import functools
import hashlib
import json
import random
import re
from collections.abc import Sequence

from etils import epath

from bert_jax.atomic_write import write_text_atomic

KINDS = ("sst2", "mrpc", "conll", "squad")
VERSION = 3  # of the constructions below; a workdir records it, so a change is not mixed in
_CONTEXT_WORDS = 60  # with the question, one 128-piece window holds the whole context
_COMMON_WORDS = 100
_QUESTIONS_PER_SENTENCE = 2  # blanking different words, as SQuAD asks several per paragraph
_PLAIN_WORD = re.compile(r"^[A-Za-z][A-Za-z'-]*[.,;:]?$")


@functools.cache  # each task reads every sentence, per split: cleared after each build
def _plain(sentence: str, lo: int = 6, hi: int = 30) -> tuple[str, ...] | None:
    """The sentence's words if it is plain prose of lo..hi words (no code, no tabs)."""
    words = sentence.split()
    if lo <= len(words) <= hi and all(_PLAIN_WORD.match(w) for w in words):
        return tuple(words)
    return None


def _word_key(word: str) -> str:
    """A word as the suite compares words: lower case, without trailing or leading .,;:"""
    return word.lower().strip(".,;:")


def _content_keys(words: Sequence[str], common: frozenset[str], shortest: int) -> list[str]:
    """The sentence's distinct content words: alphabetic, not among the common words."""
    keys = (_word_key(w) for w in words)
    return sorted({k for k in keys if k.isalpha() and len(k) >= shortest and k not in common})


def _dressed_as(new: str, old: str) -> str:
    """`new` with `old`'s capitalisation and trailing punctuation, so neither marks a swap."""
    punct = old[len(old.rstrip(".,;:")) :]
    if old[:1].isupper():
        new = new[:1].upper() + new[1:]
    return new + punct


def _swapped_word(docs, n: int, rng: random.Random, common: frozenset[str]) -> list[tuple]:
    in_doc = [{_word_key(w) for s in doc for w in s.split()} for doc in docs]
    counts = collections.Counter(
        k for doc in docs for s in doc if (w := _plain(s)) for k in _content_keys(w, common, 4)
    )
    by_ending: dict[str, list[str]] = collections.defaultdict(list)
    for key in sorted(counts):
        by_ending[key[-2:]].append(key)

    def swap(key: str, d: int) -> str | None:
        keys = by_ending[key[-2:]]
        for new in rng.choices(keys, [counts[k] for k in keys], k=20):
            if new not in in_doc[d]:
                return new
        return None

    rows = []
    for d, doc in enumerate(docs):
        for sent in doc:
            words = _plain(sent)
            if len(rows) >= n or words is None:
                continue
            spots = [i for i, w in enumerate(words) if _word_key(w) in counts]
            if not spots:
                continue  # either label needs a word that could be swapped
            if rng.random() < 0.5:
                rows.append((" ".join(words), 1))
                continue
            rng.shuffle(spots)
            for i in spots:
                if (new := swap(_word_key(words[i]), d)) is not None:
                    swapped = [*words[:i], _dressed_as(new, words[i]), *words[i + 1 :]]
                    rows.append((" ".join(swapped), 0))
                    break
    return rows


def _shared_word_pairs(docs, n: int, rng: random.Random, common: frozenset[str]) -> list[tuple]:
    """Pairs of sentences that occur once in `docs` and share a content word."""
    seen = collections.Counter(" ".join(s.split()) for doc in docs for s in doc)
    sentences = [[(i, w) for i, s in enumerate(doc) if (w := _plain(s, 4, 40))
                  and seen[" ".join(w)] == 1] for doc in docs]  # fmt: skip
    where: dict[str, list[tuple[int, int, str]]] = collections.defaultdict(list)
    for d, sents in enumerate(sentences):
        for i, words in sents:
            for key in _content_keys(words, common, 3):
                where[key].append((d, i, " ".join(words)))
    rows, used = [], set()
    for d, sents in enumerate(sentences):
        for i, words in sents:
            if len(rows) >= n:
                return rows
            keys = _content_keys(words, common, 3)
            rng.shuffle(keys)
            for key in keys:
                same = [s for dd, j, s in where[key] if dd == d and abs(j - i) >= 2]
                other = [s for dd, _, s in where[key] if dd != d]
                if same and other:  # both labels possible for this word: it tells nothing
                    label = int(rng.random() < 0.5)
                    second = rng.choice(same if label else other)
                    if (first := " ".join(words), second) not in used:
                        used.add((first, second))
                        rows.append((first, second, label))
                    break
    return rows


def _replaced_words(docs, n: int, rng: random.Random) -> list[list[tuple[str, str]]]:
    sentences = [w for doc in docs for s in doc if (w := _plain(s)) is not None]
    counts = collections.Counter(_word_key(w) for s in sentences for w in s)
    vocab, weights = zip(*sorted(counts.items()), strict=True)
    out = []
    for words in sentences[:n]:
        k = rng.choices((0, 1, 2), (0.2, 0.5, 0.3))[0]
        replaced = set(rng.sample(range(len(words)), k))
        tagged = []
        for i, word in enumerate(words):
            if i in replaced:
                new = word
                while _word_key(new) == _word_key(word):
                    new = rng.choices(vocab, weights)[0]
                tagged.append((_dressed_as(new, word), "B-MISC"))
            else:
                tagged.append((word, "O"))
        out.append(tagged)
    return out


QUESTION = "Which word of the passage fills the blank _ ?"


def _cloze_after_context(
    docs, n: int, rng: random.Random, prefix: str, common: frozenset[str]
) -> list[dict]:
    """Up to two questions per plain sentence that ends a context of at most `_CONTEXT_WORDS`
    words: in the context, one word of that sentence is blanked, a word that also stands in
    the sentences before it and is not among the documents' most common words (`common`).
    Every occurrence before the blank is an answer."""
    articles, count = [], 0
    for d, doc in enumerate(docs):
        paragraphs = []
        for j in range(1, len(doc)):
            words = _plain(doc[j], 6, 25)
            if count >= n or words is None:
                continue
            sents = doc[max(0, j - 3) : j]
            while len(sents) > 1 and len(" ".join([*sents, doc[j]]).split()) > _CONTEXT_WORDS:
                sents = sents[1:]
            before = " ".join(" ".join(s.split()) for s in sents)
            if len(before.split()) + len(words) > _CONTEXT_WORDS:
                continue
            if " ".join(words).lower() in before.lower() or "_" in before:
                continue  # a repeated sentence (the blank would be copied), or a second "_"
            found = {}
            for i, word in enumerate(words):
                key = _word_key(word)
                if key in common or key in found or len(key) < 2:
                    continue
                spots = list(re.finditer(rf"(?<![\w'-]){re.escape(key)}(?![\w'-])", before, re.I))
                if spots:
                    found[key] = (i, spots)
            for key in rng.sample(sorted(found), min(_QUESTIONS_PER_SENTENCE, len(found))):
                if count >= n:
                    break
                i, spots = found[key]
                punct = words[i][len(words[i].rstrip(".,;:")) :]  # the blank keeps it: "_."
                blanked = " ".join([*words[:i], "_" + punct, *words[i + 1 :]])
                answers = [{"text": m.group(0), "answer_start": m.start()} for m in spots]
                qa = {"id": f"{prefix}-{count}", "question": QUESTION, "answers": answers}
                paragraphs.append({"context": f"{before} {blanked}", "qas": [qa]})
                count += 1
        if paragraphs:
            articles.append({"title": f"{prefix}-doc{d}", "paragraphs": paragraphs})
    return articles


def _split_file(kind: str, split: str, rows) -> tuple[str, str]:
    """The split's file in `kind`'s layout: (its name, its text)."""
    if kind == "sst2":
        lines = ["sentence\tlabel"] + [f"{s}\t{y}" for s, y in rows]
        return f"{split}.tsv", "\n".join(lines) + "\n"
    if kind == "mrpc":
        lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        lines += [f"{y}\t{2 * i}\t{2 * i + 1}\t{a}\t{b}" for i, (a, b, y) in enumerate(rows)]
        return f"{split}.tsv", "\n".join(lines) + "\n"
    if kind == "conll":
        blocks = ["-DOCSTART- O\n"] + ["\n".join(f"{w} {t}" for w, t in s) + "\n" for s in rows]
        return ("train.txt" if split == "train" else "valid.txt"), "\n".join(blocks)
    data = {"version": "1.1", "data": rows}
    return f"{split}-v1.1.json", json.dumps(data, ensure_ascii=False)


# Suites this process has made, by a digest of their inputs: every ablation workdir made from
# the same text builds the same suite (the tests make many), and a build reads every sentence
# of the held-out documents several times. The last few are kept.
_MADE: dict[str, tuple[dict[str, str], dict[str, dict[str, int]]]] = {}
_KEEP = 4


def _inputs_digest(documents: Sequence[list[str]], *settings: int) -> str:
    digest = hashlib.sha256(json.dumps([VERSION, *settings]).encode())
    for doc in documents:
        digest.update(("\n".join(doc) + "\n\n").encode("utf-8"))
    return digest.hexdigest()


def build_suite(
    documents: Sequence[list[str]],
    out_dir: str,
    train_examples: int = 2000,
    dev_examples: int = 500,
    seed: int = 0,
) -> dict[str, dict[str, int]]:
    """Writes `<out_dir>/<kind>/` for every kind; returns the example counts per kind and split.
    Even-numbered documents feed the train splits, odd-numbered ones the dev splits."""
    key = _inputs_digest(documents, train_examples, dev_examples, seed)
    if key not in _MADE:
        try:
            _MADE[key] = _build(documents, train_examples, dev_examples, seed)
        finally:
            _plain.cache_clear()
        while len(_MADE) > _KEEP:
            del _MADE[next(iter(_MADE))]
    files, counts = _MADE[key]
    for name, text in files.items():
        path = epath.Path(out_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    return copy.deepcopy(counts)


def _build(documents, train_examples: int, dev_examples: int, seed: int) -> tuple[dict, dict]:
    """The suite's files ({"<kind>/<file>": text}) and its example counts."""
    words = collections.Counter(_word_key(w) for doc in documents for s in doc for w in s.split())
    common = frozenset(w for w, _ in words.most_common(_COMMON_WORDS))
    makers = {
        "sst2": lambda docs, n, rng: _swapped_word(docs, n, rng, common),
        "mrpc": lambda docs, n, rng: _shared_word_pairs(docs, n, rng, common),
        "conll": _replaced_words,
        "squad": lambda docs, n, rng, split: _cloze_after_context(docs, n, rng, split, common),
    }
    files: dict[str, str] = {}
    counts: dict[str, dict[str, int]] = {}
    for kind in KINDS:
        counts[kind] = {}
        for split, parity, n in (("train", 0, train_examples), ("dev", 1, dev_examples)):
            docs = list(documents[parity::2])
            rng = random.Random(f"{seed}/{kind}/{split}")
            args = (docs, n, rng, split) if kind == "squad" else (docs, n, rng)
            rows = makers[kind](*args)
            name, text = _split_file(kind, split, rows)
            files[f"{kind}/{name}"] = text
            counts[kind][split] = (
                sum(len(p["qas"]) for a in rows for p in a["paragraphs"])
                if kind == "squad"
                else len(rows)
            )
    return files, counts
