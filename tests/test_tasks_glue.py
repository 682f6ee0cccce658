"""GLUE: the download layout of all nine tasks, featurisation vs Hugging Face's tokenizer,
the benchmark's metrics vs hand-computed values, submission files, bad rows, and tfds."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from bert_jax.errors import BertJaxError
from bert_jax.tasks import glue
from bert_jax.tokenization import FullTokenizer

FIX = pathlib.Path(__file__).parent / "fixtures" / "tasks" / "glue"


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return FullTokenizer(str(uncased_vocab), do_lower_case=True)


# (task, split, number of examples, first example's text_a prefix, text_b prefix, label)
EXPECTED = [
    ("cola", "train", 4, "Our friends won't", None, "1"),
    ("cola", "test", 2, "Bill whistled", None, None),
    ("sst2", "dev", 2, "it 's a lovely", None, "1"),
    ("mrpc", "train", 4, "Amrozi accused", "Referring to him", "1"),
    ("mrpc", "test", 1, "PCCW 's chief", "Current Chief", None),
    ("stsb", "dev", 4, "A man with a hard hat", "A man wearing", 5.0),
    ("qqp", "dev", 3, "Why are African", "Why are hispanics", "0"),
    ("qqp", "test", 1, "Why do rockets", "Why are rockets", None),
    ("mnli", "dev_matched", 2, "The new rights", "Everyone really", "neutral"),
    ("mnli", "dev_mismatched", 2, "Your contribution", "Your contributions", "contradiction"),
    ("mnli", "test_mismatched", 1, "What have you", "So what's", None),
    ("qnli", "train", 4, "When did the third", "Unlike the two", "not_entailment"),
    ("rte", "dev", 2, "Dana Reeve", "Christopher Reeve had", "not_entailment"),
    ("wnli", "train", 4, "I stuck a pin", "The carrot had", "1"),
]


@pytest.mark.parametrize("name,split,n,a,b,label", EXPECTED)
def test_reads_the_glue_layout(name, split, n, a, b, label):
    task = glue.get_spec(name)
    examples = glue.read_split(task, str(FIX / name), split)
    assert len(examples) == n
    first = examples[0]
    assert first.text_a.startswith(a)
    assert (first.text_b is None) if b is None else first.text_b.startswith(b)
    assert first.label == label


def test_every_task_has_train_dev_test_fixtures():
    for name, task in glue.TASKS.items():
        for split in ("train", *task.dev_splits, *task.test_splits):
            assert glue.read_split(task, str(FIX / name), split), (name, split)


def test_features_match_hugging_face_pair_encoding(tokenizer, minilm_dir):
    from transformers import BertTokenizerFast

    hf = BertTokenizerFast.from_pretrained(str(minilm_dir))
    task = glue.get_spec("mrpc")
    examples = glue.read_split(task, str(FIX / "mrpc"), "train")
    feats = glue.featurize(task, examples, tokenizer, 128)
    for i, ex in enumerate(examples):
        enc = hf(ex.text_a, ex.text_b, max_length=128, padding="max_length", truncation=True)
        np.testing.assert_array_equal(feats["input_ids"][i], enc["input_ids"])
        np.testing.assert_array_equal(feats["segment_ids"][i], enc["token_type_ids"])
        np.testing.assert_array_equal(feats["input_mask"][i], enc["attention_mask"])
    assert feats["labels"].tolist() == [1, 0, 1, 0]


def test_pair_truncation_pops_the_longer_side(tokenizer):
    task = glue.get_spec("rte")
    ex = glue.Example("x-0", "one two three four five six seven eight", "nine ten", "entailment")
    ids = glue.featurize(task, [ex], tokenizer, 9)["input_ids"][0]
    tokens = [tokenizer.inv_vocab[int(i)] for i in ids]
    # 9 - 3 special = 6 pieces: A is cut from 8 to 4, B (2) kept.
    assert tokens == ["[CLS]", "one", "two", "three", "four", "[SEP]", "nine", "ten", "[SEP]"]


def test_glue_empty_second_text_is_a_single_sequence(tokenizer):
    """run_classifier: a second text without word pieces gives `[CLS] A [SEP]`, cut at L-2."""
    spec = glue.get_spec("rte")
    for b in ("", " ", "\u200b", "\x07\x01", "\u0301"):
        ex = glue.Example("x-0", "one two three four five six seven eight", b, "entailment")
        ids = glue.featurize(spec, [ex], tokenizer, 8)["input_ids"][0]
        tokens = tokenizer.convert_ids_to_tokens(ids)
        assert tokens == ["[CLS]", "one", "two", "three", "four", "five", "six", "[SEP]"], b


def test_metrics_match_hand_computed_values():
    labels = np.array([1, 1, 1, 0, 0, 0, 1, 0])
    preds = np.array([1, 1, 0, 0, 0, 1, 1, 0])
    # tp=3 fn=1 fp=1 tn=3: acc 0.75, F1 0.75, MCC (9-1)/sqrt(4*4*4*4) = 0.5
    mrpc = glue.compute_metrics(glue.get_spec("mrpc"), preds, labels)
    assert mrpc == pytest.approx({"accuracy": 0.75, "f1": 0.75})
    cola = glue.compute_metrics(glue.get_spec("cola"), preds, labels)
    assert cola["mcc"] == pytest.approx(0.5)
    sts = glue.compute_metrics(
        glue.get_spec("stsb"), np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 3.0, 5.0])
    )
    assert sts["spearmanr"] == pytest.approx(1.0)
    assert sts["pearson"] == pytest.approx(np.corrcoef([1, 2, 3, 4], [1, 2, 3, 5])[0, 1])
    assert glue.headline(glue.get_spec("mrpc"), mrpc) == pytest.approx(0.75)


def test_submission_file_uses_test_index_and_label_names(tmp_path):
    task = glue.get_spec("mnli")
    examples = glue.read_split(task, str(FIX / "mnli"), "test_matched")
    path = tmp_path / "MNLI-m.tsv"
    glue.write_submission(task, examples, np.array([1]), str(path))
    assert path.read_text() == "index\tprediction\n0\tentailment\n"
    sts = glue.get_spec("stsb")
    examples = glue.read_split(sts, str(FIX / "stsb"), "test")
    glue.write_submission(sts, examples, np.array([3.14159]), str(path))
    assert path.read_text() == "index\tprediction\n0\t3.142\n"


def test_malformed_row_names_file_and_line(tmp_path):
    (tmp_path / "train.tsv").write_text(
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA ok.\tB ok.\n0\t3\t4\tonly a\n"
    )
    with pytest.raises(BertJaxError, match=r"train.tsv: line 3: expected at least 5"):
        glue.read_split(glue.get_spec("mrpc"), str(tmp_path), "train")


def test_label_outside_label_set_names_file_and_line(tmp_path):
    (tmp_path / "dev.tsv").write_text(
        "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n1\tA.\tB.\tmaybe\n"
    )
    with pytest.raises(BertJaxError, match=r"dev.tsv: line 3: label 'maybe' not in rte"):
        glue.read_split(glue.get_spec("rte"), str(tmp_path), "dev")
    (tmp_path / "dev.tsv").write_text("\t".join(["x"] * 9 + ["high"]) + "\n" * 2)
    bad = "\t".join(["0"] * 9 + ["high"])
    (tmp_path / "dev.tsv").write_text("header\n" + bad + "\n")
    with pytest.raises(BertJaxError, match=r"line 2: label 'high' is not a number"):
        glue.read_split(glue.get_spec("stsb"), str(tmp_path), "dev")


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(BertJaxError, match="no such file"):
        glue.read_split(glue.get_spec("sst2"), str(tmp_path), "train")


@pytest.mark.parametrize("name", ["mrpc", "mnli", "stsb"])
def test_tfds_glue_reads_labels_into_our_label_names(name):
    tfds = pytest.importorskip("tensorflow_datasets")
    task = glue.get_spec(name)
    split = task.tfds_dev[-1]
    with tfds.testing.mock_data(num_examples=6):
        examples = glue.read_tfds_split(task, split)
        ds = tfds.load(task.tfds_name, split=split)
        raw = list(tfds.as_numpy(ds))
    assert len(examples) == 6
    names = None if task.is_regression else tfds.builder(task.tfds_name).info.features["label"]
    for ex, r in zip(examples, raw, strict=True):
        assert ex.text_a == r[task.tfds_text[0]].decode()
        assert ex.text_b == r[task.tfds_text[1]].decode()
        if task.is_regression:
            assert ex.label == pytest.approx(float(r["label"]))
        elif name == "mnli":  # tfds orders entailment, neutral, contradiction: mapped by name
            assert ex.label == names.names[int(r["label"])]
        else:  # binary: tfds class i is GLUE's "i"
            assert ex.label == str(int(r["label"]))
