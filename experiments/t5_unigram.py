"""Unigram baselines for T5 span-corruption shards (experiments/t5.md): the most frequent
token of the training targets as a constant guess, scored on the held-out targets, over every
target token (sentinels and EOS included, as eval_target_accuracy) and over the text tokens
only (as eval_content_accuracy); the unigram model's held-out NLL (as eval_target_nll); and
the structural baseline: every sentinel and EOS right (their places are fixed by the
corruption) plus the unigram guess on the text tokens.

    python experiments/t5_unigram.py TRAIN_GLOB EVAL_GLOB SPM_MODEL INPUTS_LENGTH
"""

from __future__ import annotations

import sys

import numpy as np

from bert_jax.input.batches import expand_files
from bert_jax.input.seq2seq import read_shards
from bert_jax.objectives.span_corruption import random_spans_helper
from bert_jax.tokenization.t5_vocab import T5Vocab


def baselines(train_glob: str, eval_glob: str, spm_model: str, inputs_length: int) -> dict:
    pieces = T5Vocab(spm_model).pieces
    _, targets_length = random_spans_helper(inputs_length)
    out = {}

    def text(t: np.ndarray) -> np.ndarray:
        return (t > 1) & (t < pieces)  # not padding, EOS or a sentinel

    for name, keep in (("target", lambda t: t != 0), ("content", text)):
        train = read_shards(expand_files(train_glob), inputs_length, targets_length)["targets"]
        held = read_shards(expand_files(eval_glob), inputs_length, targets_length)["targets"]
        guess = np.bincount(train[keep(train)]).argmax()
        out[f"unigram_{name}_accuracy"] = float(np.mean(held[keep(held)] == guess))
        out[f"unigram_{name}_token"] = int(guess)
        if name == "target":  # the unigram model's held-out NLL (add-one smoothed), nats/token
            counts = np.bincount(train[keep(train)], minlength=held.max() + 1) + 1.0
            logp = np.log(counts / counts.sum())
            out["unigram_target_nll"] = float(-np.mean(logp[held[keep(held)]]))
    content = float(np.mean(text(held)[held != 0]))  # share of text tokens among the targets
    out["structural_baseline_accuracy"] = 1 - content + content * out["unigram_content_accuracy"]
    return out


if __name__ == "__main__":
    print(baselines(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
