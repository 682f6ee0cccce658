"""ELMo features for CoNLL-layout tagging: word windows over `bert_jax.arch.elmo.lm`'s word
vocabulary, and the scalar mix + BiLSTM tagger (`ElmoTagger`) as a `Task` of the shared loop.

A CoNLL word ("Hello," or "don't") may be several ELMo words (`elmo_lm.words` splits off
punctuation); its label sits on its first ELMo word, as `bert_jax.tasks.ner` puts it on the first
WordPiece, so `ner.word_predictions` and `ner.entity_f1` score both the same way. Sentences longer
than the window are split at word boundaries.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_jax.arch.elmo import lm as elmo_lm
from bert_jax.arch.elmo.model import ElmoTagger
from bert_jax.tasks import ner
from bert_jax.tasks.feature_ner import FeatureTaggingTask


def featurize(
    sentences: list[ner.Sentence], vocab: list[str], length: int
) -> tuple[dict[str, np.ndarray], list[ner.Window]]:
    """{"input_ids", "input_mask", "labels", "label_weights"} [N, length] and the windows."""
    index = {w: i for i, w in enumerate(vocab)}
    rows: list[tuple[list[int], list[int], list[int]]] = []
    windows: list[ner.Window] = []
    for si, sent in enumerate(sentences):
        pieces = [[index.get(w, elmo_lm.UNK) for w in elmo_lm.words(word)] or [elmo_lm.UNK]
                  for word in sent.words]  # fmt: skip
        start = 0
        while start < len(sent.words):
            ids, starts, labels, end = [], [], [], start
            while end < len(sent.words) and (not ids or len(ids) + len(pieces[end]) <= length):
                starts.append(len(ids))
                labels.append(ner.LABELS.index(sent.tags[end]))
                ids += pieces[end][: length - len(ids)]
                end += 1
            rows.append((ids, starts, labels))
            windows.append(ner.Window(si, start, end - start, tuple(starts)))
            start = end
    shape = (len(rows), length)
    out = {k: np.zeros(shape, np.int32) for k in ("input_ids", "input_mask", "labels")}
    out["label_weights"] = np.zeros(shape, np.float32)
    for r, (ids, starts, labels) in enumerate(rows):
        out["input_ids"][r, : len(ids)] = ids
        out["input_mask"][r, : len(ids)] = 1
        out["labels"][r, starts] = labels
        out["label_weights"][r, starts] = 1.0
    return out, windows


@dataclasses.dataclass
class ElmoTaggingTask(FeatureTaggingTask):
    """`ElmoTagger` (scalar mix + the BiLSTM) over precomputed frozen layers `features`
    [B, N, L, F] (float16); loss, predictions and FLOPs as `FeatureTaggingTask`."""

    num_layers: int = 3  # ELMo layers incl. the embedding (num_layers + 1 of the biLM)
    features_input = "layers_BxNxLxF"

    def __post_init__(self) -> None:
        self.model = ElmoTagger(self.num_labels, self.lstm_size)

    def _features_shape(self) -> tuple[int, ...]:
        return (self.global_batch_size, self.num_layers, self.max_seq_length, self.feature_size)
