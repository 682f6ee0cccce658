"""A Hugging Face directory's task head read as ours (bert_jax.arch.bert.task_heads.read_hf_head,
what a task-distillation teacher is built from), on directories transformers wrote: RoBERTa's
sentence head (dense + tanh + out_proj) becomes our pooler + classifier, a token head is one
dense layer in every variant, and DistilBERT's sentence head (pre_classifier + ReLU), which is
not our function, is refused naming the variants whose heads are."""

from __future__ import annotations

import numpy as np
import pytest
from etils import epath

from bert_jax.arch.bert.hf import _open_weights
from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.arch.bert.task_heads import hf_task_family, read_hf_head
from bert_jax.errors import BertJaxError

SIZES = dict(vocab_size=99, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=40)  # fmt: skip


def _written(tmp_path, name: str, model) -> tuple[epath.Path, dict, object]:
    path = tmp_path / name
    model.save_pretrained(path)
    _, shapes, read = _open_weights(epath.Path(path))
    return epath.Path(path), shapes, read


def _torch(model, name: str) -> np.ndarray:
    return model.state_dict()[name].numpy()


def test_roberta_sentence_head_is_our_pooler_and_classifier(tmp_path):
    import transformers

    model = transformers.RobertaForSequenceClassification(
        transformers.RobertaConfig(**SIZES, num_labels=3)
    )
    path, shapes, read = _written(tmp_path, "roberta", model)
    assert hf_task_family(["RobertaForSequenceClassification"]) == "glue"
    head = read_hf_head(str(path), "glue", load_pretrained(path).config, shapes, read)
    assert sorted(head) == ["classifier", "pooler"]
    dense_DxD = _torch(model, "classifier.dense.weight").T
    np.testing.assert_array_equal(head["pooler"]["kernel"], dense_DxD)
    np.testing.assert_array_equal(
        head["classifier"]["bias"], _torch(model, "classifier.out_proj.bias")
    )


def test_token_heads_are_one_dense_layer_and_distilberts_sentence_head_is_refused(tmp_path):
    import transformers

    config = transformers.DistilBertConfig(vocab_size=99, dim=16, n_layers=1, n_heads=2,
                                           hidden_dim=32, max_position_embeddings=40)  # fmt: skip
    tagger = transformers.DistilBertForTokenClassification(config)
    path, shapes, read = _written(tmp_path, "tagger", tagger)
    ours = load_pretrained(path).config
    assert hf_task_family(["DistilBertForTokenClassification"]) == "ner"
    head = read_hf_head(str(path), "ner", ours, shapes, read)
    kernel_DxC = _torch(tagger, "classifier.weight").T
    np.testing.assert_array_equal(head["classifier"]["kernel"], kernel_DxC)
    classifier = transformers.DistilBertForSequenceClassification(config)
    path, shapes, read = _written(tmp_path, "classifier", classifier)
    with pytest.raises(BertJaxError, match=r"distilbert's SequenceClassification head differs "
                       r"from ours \(only bert, roberta, albert sentence heads"):  # fmt: skip
        read_hf_head(str(path), "glue", ours, shapes, read)
    assert hf_task_family(["DistilBertForMaskedLM"]) == ""
