"""The offline downstream suite: four tasks built from real English text (the embedded corpus's
held-out documents), one of each kind the paper fine-tunes on, written in the layouts the
fine-tuning tasks already read, so `bert-jax finetune` and the ablation harness use them as they
would use GLUE, CoNLL-2003 or SQuAD.

  sst2   single sentence (SST-2 layout): is the sentence in its written word order (1), or were
         four consecutive words shuffled (0)?  Balanced classes.
  mrpc   sentence pair (MRPC layout): is sentence 2 the sentence that follows sentence 1 in its
         document (1), or a sentence of another document (0)?  Balanced classes.
  conll  token tagging (CoNLL layout): words replaced by a random word of the suite's vocabulary
         (drawn by corpus frequency) are tagged B-MISC, the rest O; 0, 1 or 2 per sentence.
  squad  span extraction (SQuAD v1.1 layout), a cloze in the manner of the Children's Book Test:
         the context is the up to four sentences before a sentence of a document (at most 60
         words); a question is that sentence with one word replaced by "_" (up to two questions,
         blanking different words, per sentence), a word that also stands in the context and is
         not one of the documents' 100 most common words; the answers are its occurrences in the
         context. Which context word fills the blank is a question about the language, not
         about matching the question's words against the context: suite version 1 asked for
         words cut out of a context sentence, a string alignment that no 2-layer model learned
         from its 815 examples (F1 under 10 for every arm, random init's "lead" an artefact of
         partial credit for long spans).

Train and dev examples come from different documents. Everything is a function of the documents
and `seed` (Python's `random.Random`), so a suite is the same on every machine that yields the
same corpus text.
"""

from __future__ import annotations

import collections
import json
import random
import re
from collections.abc import Sequence

from etils import epath

from bert_jax.atomic_write import write_text_atomic

KINDS = ("sst2", "mrpc", "conll", "squad")
VERSION = 2  # of the constructions below; a workdir records it, so a change is not mixed in
_CONTEXT_WORDS = 60  # with the question, one 128-piece window holds the whole context
_COMMON_WORDS = 100
_QUESTIONS_PER_SENTENCE = 2  # blanking different words, as SQuAD asks several per paragraph
_PLAIN_WORD = re.compile(r"^[A-Za-z][A-Za-z'-]*[.,;:]?$")


def _plain(sentence: str, lo: int = 6, hi: int = 30) -> list[str] | None:
    """The sentence's words if it is plain prose of lo..hi words (no code, no tabs)."""
    words = sentence.split()
    if lo <= len(words) <= hi and all(_PLAIN_WORD.match(w) for w in words):
        return words
    return None


def _word_order(docs, n: int, rng: random.Random) -> list[tuple[str, int]]:
    rows = []
    for doc in docs:
        for sent in doc:
            words = _plain(sent)
            if words is None or len(rows) >= n:
                continue
            label = 1
            if rng.random() < 0.5:
                start = rng.randrange(len(words) - 3)
                window = words[start : start + 4]
                if len(set(window)) > 1:
                    shuffled = window[:]
                    while shuffled == window:
                        rng.shuffle(shuffled)
                    words, label = words[:start] + shuffled + words[start + 4 :], 0
            rows.append((" ".join(words), label))
    return rows


def _continuation(docs, n: int, rng: random.Random) -> list[tuple[str, str, int]]:
    pool = [s for doc in docs for s in doc if _plain(s, 4, 40)]
    rows = []
    for doc in docs:
        for a, b in zip(doc, doc[1:], strict=False):
            if len(rows) >= n or not (_plain(a, 4, 40) and _plain(b, 4, 40)):
                continue
            if rng.random() < 0.5:
                rows.append((a, b, 1))
            else:
                other = rng.choice(pool)
                if other not in doc:
                    rows.append((a, other, 0))
    return rows


def _word_key(word: str) -> str:
    """A word as the suite compares words: lower case, without trailing or leading .,;:"""
    return word.lower().strip(".,;:")


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
                tagged.append((new, "B-MISC"))
            else:
                tagged.append((word, "O"))
        out.append(tagged)
    return out


def _context_cloze(
    docs, n: int, rng: random.Random, prefix: str, common: frozenset[str]
) -> list[dict]:
    """Up to two questions per plain sentence after a context of at most `_CONTEXT_WORDS` words:
    the sentence with one word blanked, a word that also stands in the context and is not among
    the documents' most common words (`common`). Every occurrence in the context is an answer."""
    articles, count = [], 0
    for d, doc in enumerate(docs):
        paragraphs = []
        for j in range(1, len(doc)):
            words = _plain(doc[j], 6, 25)
            if count >= n or words is None:
                continue
            sents = doc[max(0, j - 4) : j]
            while len(sents) > 1 and len(" ".join(sents).split()) > _CONTEXT_WORDS:
                sents = sents[1:]
            context = " ".join(" ".join(s.split()) for s in sents)
            if len(context.split()) > _CONTEXT_WORDS or " ".join(words).lower() in context.lower():
                continue  # too long, or a repeated sentence: the blank would be copied
            found = {}
            for i, word in enumerate(words):
                key = _word_key(word)
                if key in common or key in found or len(key) < 2:
                    continue
                spots = list(re.finditer(rf"(?<![\w'-]){re.escape(key)}(?![\w'-])", context, re.I))
                if spots:
                    found[key] = (i, spots)
            if not found:
                continue
            qas = []
            asked = min(_QUESTIONS_PER_SENTENCE, len(found), n - count)
            for key in rng.sample(sorted(found), asked):
                i, spots = found[key]
                punct = words[i][len(words[i].rstrip(".,;:")) :]  # the blank keeps it: "_."
                question = " ".join([*words[:i], "_" + punct, *words[i + 1 :]])
                answers = [{"text": m.group(0), "answer_start": m.start()} for m in spots]
                qas.append({"id": f"{prefix}-{count}", "question": question, "answers": answers})
                count += 1
            paragraphs.append({"context": context, "qas": qas})
        if paragraphs:
            articles.append({"title": f"{prefix}-doc{d}", "paragraphs": paragraphs})
    return articles


def _write_split(kind: str, out: epath.Path, split: str, rows) -> None:
    if kind == "sst2":
        lines = ["sentence\tlabel"] + [f"{s}\t{y}" for s, y in rows]
        write_text_atomic(out / f"{split}.tsv", "\n".join(lines) + "\n")
    elif kind == "mrpc":
        lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        lines += [f"{y}\t{2 * i}\t{2 * i + 1}\t{a}\t{b}" for i, (a, b, y) in enumerate(rows)]
        write_text_atomic(out / f"{split}.tsv", "\n".join(lines) + "\n")
    elif kind == "conll":
        blocks = ["-DOCSTART- O\n"] + ["\n".join(f"{w} {t}" for w, t in s) + "\n" for s in rows]
        write_text_atomic(out / ("train.txt" if split == "train" else "valid.txt"),
                          "\n".join(blocks))  # fmt: skip
    else:
        data = {"version": "1.1", "data": rows}
        write_text_atomic(out / f"{split}-v1.1.json", json.dumps(data, ensure_ascii=False))


def build_suite(
    documents: Sequence[list[str]],
    out_dir: str,
    train_examples: int = 2000,
    dev_examples: int = 500,
    seed: int = 0,
) -> dict[str, dict[str, int]]:
    """Writes `<out_dir>/<kind>/` for every kind; returns the example counts per kind and split.
    Even-numbered documents feed the train splits, odd-numbered ones the dev splits."""
    words = collections.Counter(_word_key(w) for doc in documents for s in doc for w in s.split())
    common = frozenset(w for w, _ in words.most_common(_COMMON_WORDS))
    makers = {
        "sst2": _word_order,
        "mrpc": _continuation,
        "conll": _replaced_words,
        "squad": lambda docs, n, rng, split: _context_cloze(docs, n, rng, split, common),
    }
    counts: dict[str, dict[str, int]] = {}
    for kind in KINDS:
        out = epath.Path(out_dir) / kind
        out.mkdir(parents=True, exist_ok=True)
        counts[kind] = {}
        for split, parity, n in (("train", 0, train_examples), ("dev", 1, dev_examples)):
            docs = list(documents[parity::2])
            rng = random.Random(f"{seed}/{kind}/{split}")
            args = (docs, n, rng, split) if kind == "squad" else (docs, n, rng)
            rows = makers[kind](*args)
            _write_split(kind, out, split, rows)
            counts[kind][split] = (
                sum(len(p["qas"]) for a in rows for p in a["paragraphs"])
                if kind == "squad"
                else len(rows)
            )
    return counts
