"""Unlabeled transfer text -> rows of the task's features, for the teacher to label.

Text inputs are what create-pretraining-data reads (`--input_file`: globs, local or gs://,
`embedded:` for the embedded corpus, `tfds:NAME`): one sentence per line, a blank line between
documents. How a row is made from them:

    glue, one-sentence task   every sentence is one example
    glue, sentence-pair task  `adjacent`: sentence i and sentence i+1 of one document, for every
                              i; `mixed`: the same pairs, but every second one has its second
                              sentence drawn from another document (seeded), so the transfer set
                              holds pairs that do not belong together as task pairs do
    ner                       every sentence, split on whitespace into words
    squad                     the inputs are SQuAD-format JSON files (questions need not have
                              answers); every window of every question, as the dev set's

Rows carry no hard label (`has_label` 0). Everything is a function of the text and `seed`.
"""

from __future__ import annotations

import random

import numpy as np

from bert_jax.corpus.sources import check_text, resolve_inputs
from bert_jax.errors import BertJaxError
from bert_jax.tasks import glue, ner, squad

PAIRINGS = ("adjacent", "mixed")
# The hard-label columns of each task family's training rows.
LABEL_KEYS = {
    "glue": ("labels",),
    "ner": ("labels", "label_weights"),
    "squad": ("start_positions", "end_positions"),
}
INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


def read_documents(input_file: str) -> list[list[str]]:
    sources = resolve_inputs(input_file)
    check_text(sources)
    docs: list[list[str]] = []
    for source in sources:
        text = b"".join(source.iter_bytes()).decode("utf-8", errors="replace")
        doc: list[str] = []
        for line in text.splitlines():
            if line.strip():
                doc.append(line.strip())
            elif doc:
                docs.append(doc)
                doc = []
        if doc:
            docs.append(doc)
    return docs


def _glue_examples(spec, docs, pairing: str, seed: int) -> list[glue.Example]:
    if spec.train_dev.b is None:
        return [glue.Example(f"transfer-{i}", s, None, None)
                for i, s in enumerate(s for d in docs for s in d)]  # fmt: skip
    rng = random.Random(seed)
    out = []
    for d, doc in enumerate(docs):
        for i in range(len(doc) - 1):
            b = doc[i + 1]
            if pairing == "mixed" and len(out) % 2 == 1 and len(docs) > 1:
                other = rng.randrange(len(docs) - 1)
                b = rng.choice(docs[other + (other >= d)])
            out.append(glue.Example(f"transfer-{len(out)}", doc[i], b, None))
    return out


def featurize(
    cfg, tokenizer, input_file: str, pairing: str, seed: int, limit: int
) -> tuple[dict[str, np.ndarray], int]:
    """(rows, examples read) of the transfer inputs for the config's task family; at most
    `limit` examples (0: all)."""
    if pairing not in PAIRINGS:
        raise BertJaxError(f"--pairing={pairing!r}: use one of {', '.join(PAIRINGS)}")
    L = cfg.max_seq_length
    if cfg.task_family == "squad":
        examples = []
        for source in resolve_inputs(input_file):
            if source.kind != "file":
                raise BertJaxError(f"--input_file: {source.name}: squad takes SQuAD JSON files")
            ex, _ = squad.read_examples(source.name, False, cfg.version == "v2.0")
            examples += ex
        examples = examples[:limit] if limit else examples
        arrays, _ = squad.featurize(examples, tokenizer, L, cfg.doc_stride, cfg.max_query_length)
        return arrays, len(examples)
    docs = read_documents(input_file)
    if cfg.task_family == "ner":
        sents = [ner.Sentence(tuple(s.split()), ("O",) * len(s.split()))
                 for d in docs for s in d if s.split()]  # fmt: skip
        sents = sents[:limit] if limit else sents
        arrays, _ = ner.featurize(sents, tokenizer, L)
        return arrays, len(sents)
    spec = glue.get_spec(cfg.task)
    examples = _glue_examples(spec, docs, pairing, seed)
    examples = examples[:limit] if limit else examples
    return glue.featurize(spec, examples, tokenizer, L), len(examples)


def training_rows(
    cfg, job, tokenizer, input_file: str, pairing: str, seed: int, limit: int
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The task's training rows (`job` loaded with `tokenizer`; has_label 1), then the transfer
    rows (has_label 0), and their counts {"task", "transfer", "total"}."""
    keys = (*INPUT_KEYS, *LABEL_KEYS[cfg.task_family])
    parts = [{k: job.train[k] for k in keys}]
    counts = {"task": len(parts[0]["input_ids"]), "transfer": 0}
    parts[0]["has_label"] = np.ones(counts["task"], np.int32)
    if input_file:
        extra, _ = featurize(cfg, tokenizer, input_file, pairing, seed, limit)
        parts.append({k: extra[k] for k in keys})
        counts["transfer"] = len(extra["input_ids"])
        parts[1]["has_label"] = np.zeros(counts["transfer"], np.int32)
    rows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    counts["total"] = counts["task"] + counts["transfer"]
    return rows, counts
