"""SQuAD: the official EM/F1 (normalisation on tricky strings, v2 NoAns and best threshold), the
reference featurisation (windows, max context, answer positions) and the post-processing back to
the exact original text, plus bad answers and over-long questions."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from bert_jax.errors import BertJaxError
from bert_jax.tasks import squad, squad_eval, squad_predict
from bert_jax.tokenization import FullTokenizer

FIX = pathlib.Path(__file__).parent / "fixtures" / "tasks" / "squad"


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return FullTokenizer(str(uncased_vocab), do_lower_case=True)


@pytest.mark.parametrize(
    "raw,normal",
    [
        ("The  Quick, brown fox!", "quick brown fox"),
        ("an apple a day", "apple day"),
        ("Theatre and Anthem", "theatre and anthem"),  # articles only as whole words
        ("A.B.C.", "abc"),  # ASCII punctuation removed without a space
        ("rock 'n' roll", "rock n roll"),
        ("well-known", "wellknown"),
        (
            "\u201cquoted\u201d",
            "\u201cquoted\u201d",
        ),  # typographic quotes are not in string.punctuation
        ("Façade\tÉTÉ\n", "façade été"),  # lowercased, accents kept, whitespace collapsed
        ("the", ""),
    ],
)
def test_official_normalisation(raw, normal):
    assert squad_eval.normalize_answer(raw) == normal


def test_exact_match_and_f1_known_values():
    assert squad_eval.exact_match("The Eiffel Tower.", "eiffel tower") == 1.0
    assert squad_eval.f1_score("the cat sat", "cat sat on the mat") == pytest.approx(2 / 3)
    # Counter intersection: 'red' once and 'blue' once in common -> p = r = 2/3.
    assert squad_eval.f1_score("red red blue", "red blue blue") == pytest.approx(2 / 3)
    assert squad_eval.f1_score("nothing", "else") == 0.0
    assert squad_eval.f1_score("a", "something") == 0.0  # 'a' normalises to empty
    # Both normalise to "": v1.1 scores F1 0 (nothing overlaps), v2.0 scores 1.
    assert squad_eval.f1_score("A.", "A") == 0.0 and squad_eval.exact_match("A.", "A") == 1.0
    assert squad_eval.f1_score_v2("A.", "A") == 1.0 and squad_eval.f1_score_v2("", "x") == 0.0


def test_v1_does_not_apply_the_v2_empty_answer_rule():
    data = _dataset([{"id": "1", "answers": [{"text": "A"}, {"text": "A woman's"}]}])
    assert squad_eval.evaluate_v1(data, {"1": "A."}) == {"exact_match": 100.0, "f1": 0.0}


def _dataset(qas):
    return [{"paragraphs": [{"context": "c", "qas": qas}]}]


def test_evaluate_v1_takes_max_over_golds_and_scores_missing_as_zero():
    data = _dataset(
        [
            {"id": "1", "answers": [{"text": "Denver Broncos"}, {"text": "the Broncos"}]},
            {"id": "2", "answers": [{"text": "Santa Clara, California"}]},
            {"id": "3", "answers": [{"text": "gold"}]},
        ]
    )
    out = squad_eval.evaluate_v1(data, {"1": "Broncos", "2": "Santa Clara"})
    # q1: EM 1 via "the Broncos"; q2: EM 0, F1 2*(1*2/3)/(1+2/3) = 0.8; q3 missing.
    assert out["exact_match"] == pytest.approx(100 / 3)
    assert out["f1"] == pytest.approx(100 * (1 + 0.8) / 3)


def test_evaluate_v2_noans_and_best_threshold():
    data = _dataset(
        [
            {"id": "a", "answers": [{"text": "Paris"}]},
            {"id": "b", "answers": [{"text": "1066"}]},
            {"id": "n", "answers": [], "is_impossible": True},
        ]
    )
    preds = {"a": "Paris", "b": "1067", "n": "London"}
    odds = {"a": -3.0, "b": 1.0, "n": 2.0}
    out = squad_eval.evaluate_v2(data, preds, odds, na_prob_thresh=1.5)
    # threshold 1.5: only "n" abstains (correct); a right, b wrong.
    assert out["exact"] == pytest.approx(200 / 3)
    assert out["HasAns_exact"] == pytest.approx(50.0) and out["HasAns_total"] == 2
    assert out["NoAns_exact"] == pytest.approx(100.0) and out["NoAns_total"] == 1
    # Sweep: answering nothing scores 1/3; answer a (-3): 2/3; + b (1.0): 2/3; + n: 1/3.
    assert out["best_exact"] == pytest.approx(200 / 3)
    assert out["best_exact_thresh"] == -3.0


def test_evaluate_v2_splits_on_raw_answers_and_skips_missing_predictions():
    data = _dataset(
        [
            {"id": "t", "answers": [{"text": "The"}, {"text": "The"}]},  # answerable, golds -> ""
            {"id": "p", "answers": [{"text": "Paris"}]},
            {"id": "n", "answers": [], "is_impossible": True},
            {"id": "m", "answers": [{"text": "Rome"}]},  # no prediction: not counted at all
        ]
    )
    out = squad_eval.evaluate_v2(data, {"t": "", "p": "Paris", "n": "x"})
    assert out["total"] == 3 and out["exact"] == pytest.approx(200 / 3)
    assert out["HasAns_total"] == 2 and out["HasAns_exact"] == 100.0  # "" matches gold ""
    assert out["NoAns_total"] == 1 and out["NoAns_exact"] == 0.0


def test_whitespace_split_and_char_map():
    words, char_to_word = squad.split_on_whitespace("Hi  there\u202fyou")
    assert words == ["Hi", "there", "you"]
    assert char_to_word == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2]


def _decode(tokens, s, e):
    return " ".join(tokens[s : e + 1]).replace(" ##", "")


def test_sliding_windows_max_context_and_targets(tokenizer):
    examples, stats = squad.read_examples(str(FIX / "train-v1.1.json"), True, False)
    assert stats.questions == 5 and stats.skipped_bad_answer == 0
    arrays, metas = squad.featurize(
        examples, tokenizer, max_seq_length=48, doc_stride=16, max_query_length=12,
        is_training=True,
    )  # fmt: skip
    assert len(metas) > len(examples)  # long contexts become several windows
    for ex_index, ex in enumerate(examples):
        feats = [(i, m) for i, m in enumerate(metas) if m.example_index == ex_index]
        # every context word piece is max-context in exactly one window
        counts = [sum(m.token_is_max_context.values()) for _, m in feats]
        total_pieces = sum(len(tokenizer.tokenize(w)) for w in ex.doc_tokens)
        assert sum(counts) == total_pieces
        answer = " ".join(tokenizer.tokenize(ex.orig_answer_text))
        hits = [
            _decode(m.tokens, arrays["start_positions"][i], arrays["end_positions"][i])
            for i, m in feats
            if arrays["start_positions"][i] > 0
        ]
        assert hits and all(h == answer for h in hits), (ex.qas_id, hits, answer)
        assert all(
            arrays["end_positions"][i] == 0 for i, _ in feats if arrays["start_positions"][i] == 0
        )
    assert arrays["input_ids"].shape == (len(metas), 48)


def _oracle_logits(arrays, n, big=10.0):
    start = np.zeros((n, arrays["input_ids"].shape[1]), np.float32)
    end = np.zeros_like(start)
    start[np.arange(n), arrays["start_positions"]] = big
    end[np.arange(n), arrays["end_positions"]] = big
    return start, end


@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_oracle_logits_give_the_exact_original_answers(tokenizer, version, tmp_path):
    v2 = version == "v2.0"
    path = str(FIX / f"dev-{version}.json")
    examples, _ = squad.read_examples(path, True, v2)
    arrays, metas = squad.featurize(examples, tokenizer, 64, 24, 16, is_training=True)
    start, end = _oracle_logits(arrays, len(metas))
    preds, nbest, odds = squad_predict.predict(
        examples, metas, start, end, version_2=v2, n_best_size=5
    )
    gold = {ex.qas_id: ex.orig_answer_text for ex in examples}
    assert preds == gold  # original casing and punctuation: "Denmark, Iceland and Norway"
    assert preds["q5"] == "Denmark, Iceland and Norway"
    assert all(len(v) <= 5 and abs(sum(e["probability"] for e in v) - 1) < 1e-6
               for v in nbest.values())  # fmt: skip
    data = squad.load_dataset(path)
    if v2:
        assert preds["q6"] == "" and odds["q6"] > 0 and odds["q1"] < 0
        out = squad_eval.evaluate_v2(data, preds, odds)
        assert out["exact"] == 100.0 and out["NoAns_total"] == 2
    else:
        assert squad_eval.evaluate_v1(data, preds) == {"exact_match": 100.0, "f1": 100.0}
    squad_predict.write_json(preds, str(tmp_path / "predictions.json"))
    assert json.loads((tmp_path / "predictions.json").read_text()) == preds


def test_final_text_projects_onto_original_characters():
    assert squad_predict.final_text("steve smith", "Steve Smith's", True) == "Steve Smith"
    assert squad_predict.final_text("1895", "(1895)", True) == "1895"
    # A word-final capital sigma lowercases to "ς" (Python's str.lower, as the reference).
    assert squad_predict.final_text("οδος alike", "ΟΔΟΣ alike;", True) == "ΟΔΟΣ alike"
    # pieces that are not in the original text: the whole original span is returned
    assert squad_predict.final_text("xyz", "Café", True) == "Café"


def _train_with_answer_start(tmp_path, start_of) -> str:
    data = json.loads((FIX / "train-v1.1.json").read_text())
    para = data["data"][1]["paragraphs"][0]
    answer = para["qas"][0]["answers"][0]  # "France"
    answer["answer_start"] = start_of(para["context"], answer["answer_start"])
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_answer_start_inside_a_word_is_kept_as_the_reference_or_skipped_on_request(
    tmp_path, tokenizer
):
    path = _train_with_answer_start(tmp_path, lambda context, start: start + 3)
    examples, stats = squad.read_examples(path, True, False)
    assert stats.skipped_bad_answer == 0 and len(examples) == 5
    france = next(ex for ex in examples if ex.qas_id == "q4")
    # Words from "France." (the offset's word) to "They" (the end offset's word) hold "France".
    assert france.doc_tokens[france.start_position : france.end_position + 1] == [
        "France.", "They"
    ]  # fmt: skip
    arrays, metas = squad.featurize([france], tokenizer, 64, 24, 16, is_training=True)
    s, e = arrays["start_positions"][0], arrays["end_positions"][0]
    assert metas[0].tokens[s : e + 1] == ["france"]  # the tightest span that spells the answer
    examples, stats = squad.read_examples(path, True, False, skip_misaligned=True)
    assert stats.skipped_bad_answer == 1 and len(examples) == 4
    with pytest.raises(BertJaxError, match=r"train.json: question q4: answer 'France' is not at"):
        squad.read_examples(path, True, False, strict=True, skip_misaligned=True)


def test_unrecoverable_answer_is_skipped_and_counted_or_strict_error(tmp_path):
    path = _train_with_answer_start(tmp_path, lambda context, start: context.index("Denmark"))
    examples, stats = squad.read_examples(path, True, False)
    assert stats.skipped_bad_answer == 1 and len(examples) == 4
    with pytest.raises(BertJaxError, match=r"train.json: question q4: answer 'France' not reco"):
        squad.read_examples(path, True, False, strict=True)


def test_overlong_question_is_truncated_and_counted(tokenizer):
    examples, stats = squad.read_examples(str(FIX / "dev-v1.1.json"), False, False)
    examples[0].question_text = " ".join(["why"] * 100)
    arrays, metas = squad.featurize(examples[:1], tokenizer, 128, 32, 64, stats=stats)
    assert stats.truncated_questions == 1
    assert metas[0].tokens[1:65] == ["why"] * 64 and metas[0].tokens[65] == "[SEP]"
    with pytest.raises(BertJaxError, match="must exceed max_query_length"):
        squad.featurize(examples, tokenizer, 64, 32, 64)


def test_invalid_json_names_file_and_line(tmp_path):
    (tmp_path / "x.json").write_text('{"data": [\n  {"title": }\n]}')
    with pytest.raises(BertJaxError, match=r"x.json: line 2: invalid JSON"):
        squad.load_dataset(str(tmp_path / "x.json"))
