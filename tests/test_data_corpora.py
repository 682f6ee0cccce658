"""Corpus sources: the embedded no-download corpus and tensorflow-datasets text datasets."""

from __future__ import annotations

import numpy as np
import pytest

from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.shards.example import decode
from bert_jax.shards.tfrecord import read_records

REVIEWS = [
    "A quiet film about a lighthouse keeper. The acting is superb! Would I watch it again? Yes.",
    "The plot drags in the middle.\nStill, the final twenty minutes are worth the wait.",
    "Dull. The dialogue never rises above cliché and the pacing is glacial.",
]


def _records(out) -> list[dict]:
    return [decode(r) for p in sorted(out.glob("*.tfrecord")) for r in read_records(p)]


def test_embedded_corpus_needs_no_download(tmp_path, uncased_vocab):
    stats = create_pretraining_data(
        "embedded:40", str(tmp_path / "o"), str(uncased_vocab), max_seq_length=64,
        max_predictions_per_seq=10, dupe_factor=1,
    )  # fmt: skip
    assert stats["documents"] == 40 and stats["instances"] == len(_records(tmp_path / "o")) > 40


def test_tfds_text_dataset(tmp_path, uncased_vocab, minilm_dir):
    tfds = pytest.importorskip("tensorflow_datasets")
    tf = pytest.importorskip("tensorflow")

    def as_dataset(self, split, *args, **kwargs):
        return tf.data.Dataset.from_tensor_slices({"text": REVIEWS, "label": [1, 0, 0]})

    with tfds.testing.mock_data(num_examples=3, as_dataset_fn=as_dataset):
        stats = create_pretraining_data(
            "tfds:imdb_reviews:train", str(tmp_path / "o"), str(uncased_vocab),
            max_seq_length=128, max_predictions_per_seq=20, dupe_factor=1,
            objective="full_sentences", dynamic_masking=True,
        )  # fmt: skip
    # One document per example, one line per sentence.
    assert stats["documents"] == 3 and stats["sentences"] == 8
    from transformers import BertTokenizerFast

    tok = BertTokenizerFast.from_pretrained(str(minilm_dir))
    records = _records(tmp_path / "o")
    ids = np.concatenate([r["input_ids"][1 : int(r["input_mask"].sum()) - 1] for r in records])
    ids = ids[ids != 102]
    expected = sum((tok(t, add_special_tokens=False)["input_ids"] for t in REVIEWS), [])
    assert sorted(ids.tolist()) == sorted(expected)
