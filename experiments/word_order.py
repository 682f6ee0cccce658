"""A real, download-free sanity task: is this English sentence in its original word order?

Sentences are the prose of CPython's own standard-library docstrings as the embedded corpus
(`bert_jax.corpus.embedded`, parsed with ast, so fixed for a Python version) yields them:
real English written by people, kept when they are 8..25 plain words. Half of them, chosen by a
seeded RNG, have their words shuffled (label 0, "unacceptable"); the rest keep their order
(label 1). The final period is dropped from every sentence so that punctuation position is no
giveaway. The labels are thus a true property of each text, the classes are balanced (majority
baseline ~50%), and a model needs knowledge of English word order to beat chance: a good check
that pretrained weights were loaded and fine-tuning works. Written in the CoLA layout (no header:
source, label, mark, sentence), so `experiments/configs/glue.py:cola` fine-tunes on it:

  python experiments/word_order.py /tmp/word_order          # train.tsv, dev.tsv
  bert-jax finetune --config experiments/configs/glue.py:cola --workdir /tmp/wo \
      --config.init_checkpoint=/path/to/bert --config.data_dir=/tmp/word_order

Used by tests/test_tasks_finetune.py and experiments/bench/bench_finetune.py (which load this file
by path; experiments/ is not a package). Expect dev accuracy far above the majority class
(MiniLM-L6, 256 train sentences, 32 steps: >= majority + 0.25).
"""

from __future__ import annotations

import os
import random
import re

_WORD = re.compile(r"^[A-Za-z][A-Za-z'-]*[,;]?$")


def stdlib_sentences(limit: int = 3000) -> list[str]:
    """Up to `limit` plain-prose sentences (final period removed) of the embedded corpus."""
    from bert_jax.corpus import embedded as embedded_corpus

    found: set[str] = set()
    for doc in embedded_corpus.iter_documents(min_sentences=1, packages=()):
        for sent in doc:
            words = sent[:-1].split()
            plain = all(_WORD.match(w) for w in words)
            if plain and sent.endswith(".") and sent[0].isupper() and 8 <= len(words) <= 25:
                found.add(" ".join(words))
        if len(found) >= limit:
            break
    return sorted(found)


def make_examples(sentences: list[str], seed: int) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    out = []
    for s in sentences:
        words = s.split()
        if rng.random() < 0.5:
            out.append((1, s))
            continue
        shuffled = words[:]
        while shuffled == words:
            rng.shuffle(shuffled)
        out.append((0, " ".join(shuffled)))
    return out


def write_cola_layout(data_dir: str, num_train: int, num_dev: int, seed: int = 0) -> dict:
    """train.tsv / dev.tsv with disjoint sentences; returns counts and the dev majority rate."""
    from bert_jax.atomic_write import write_text_atomic

    sentences = stdlib_sentences()
    random.Random(seed).shuffle(sentences)
    if len(sentences) < num_train + num_dev:
        raise ValueError(f"only {len(sentences)} sentences, asked for {num_train + num_dev}")
    os.makedirs(data_dir, exist_ok=True)
    splits = {
        "train": make_examples(sentences[:num_train], seed),
        "dev": make_examples(sentences[num_train : num_train + num_dev], seed + 1),
    }
    for split, rows in splits.items():
        lines = [f"stdlib\t{label}\t{'' if label else '*'}\t{text}\n" for label, text in rows]
        write_text_atomic(os.path.join(data_dir, f"{split}.tsv"), "".join(lines))
    dev_pos = sum(label for label, _ in splits["dev"]) / num_dev
    return {"sentences": len(sentences), "dev_majority": max(dev_pos, 1 - dev_pos)}


if __name__ == "__main__":
    import sys

    print(write_cola_layout(sys.argv[1] if len(sys.argv) > 1 else "word_order", 2000, 500))
