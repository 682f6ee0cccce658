"""How long a downstream task's fine-tuning sequences need to be: the longest of its train and
dev examples in the word pieces of the given (uncased) vocab, rounded up to a multiple of 32 and
capped at the scale's length. Padding beyond it changes no real token's output (the attention
mask hides it), so the short single-sentence tasks fine-tune at a fraction of the cost of the
full length. The span task keeps the scale's length: its documents are split with a stride over
that window. A released checkpoint's length is counted in its own WordPiece vocab (its casing
from its tokenizer_config.json); one with another kind of tokenizer keeps the scale's length.

    fine_tuning_length("sst2", "W/suite/sst2", "W/data/vocab/vocab.txt", cap=128)   # e.g. 64
    released_length("sst2", "W/suite/sst2", ckpt_dir, cap=128)                     # its vocab's
"""

from __future__ import annotations

import os

from bert_jax.ablations.inputs import FAMILY
from bert_jax.train.config import finetune_config

ROUND_TO = 32


def _longest_glue(kind: str, task_dir: str, tokenize) -> int:
    from bert_jax.tasks import glue

    spec = glue.get_spec(kind)
    longest = 0
    for split in ("train", *spec.dev_splits):
        for ex in glue.read_split(spec, task_dir, split):
            pieces = len(tokenize(ex.text_a)) + 2  # [CLS] a [SEP]
            if ex.text_b:
                pieces += len(tokenize(ex.text_b)) + 1  # b [SEP]
            longest = max(longest, pieces)
    return longest


def _longest_ner(task_dir: str, tokenize) -> int:
    from bert_jax.tasks import ner

    config = finetune_config("ner")
    longest = 0
    for name in (config.train_file, config.dev_file):
        for sentence in ner.read_conll(os.path.join(task_dir, name)):
            pieces = sum(max(1, len(tokenize(word))) for word in sentence.words)
            longest = max(longest, pieces + 2)
    return longest


def fine_tuning_length(
    kind: str, task_dir: str, vocab_file: str, cap: int, do_lower_case: bool = True
) -> int:
    """The sequence length `kind`'s fine-tuning runs use (see the module docstring)."""
    from bert_jax.tokenization import FullTokenizer

    family = FAMILY[kind]
    if family not in ("glue", "ner"):
        return cap
    tokenize = FullTokenizer(vocab_file, do_lower_case=do_lower_case).tokenize
    if family == "glue":
        longest = _longest_glue(kind, task_dir, tokenize)
    else:
        longest = _longest_ner(task_dir, tokenize)
    return min(cap, -(-longest // ROUND_TO) * ROUND_TO)


def released_length(kind: str, task_dir: str, checkpoint_dir: str | os.PathLike, cap: int) -> int:
    """`fine_tuning_length` in a released checkpoint's own vocab.txt; `cap` when it has none
    (a byte-level BPE, SentencePiece or tokenizer.json alone: their special tokens differ)."""
    from etils import epath

    from bert_jax.arch.bert.hf import guess_do_lower_case
    from bert_jax.tokenization.directory import tokenizer_file_in, tokenizer_kind

    found = tokenizer_file_in(checkpoint_dir)
    if found is None or tokenizer_kind(found) != "wordpiece":
        return cap
    lower = guess_do_lower_case(epath.Path(checkpoint_dir))
    return fine_tuning_length(kind, task_dir, str(found), cap, True if lower is None else lower)
