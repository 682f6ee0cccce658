"""SQuAD logits -> answers: n-best spans, projection onto the original text, the v2 null rule.

Per question: over all its windows take the top `n_best_size` start and end positions; keep
pairs inside the context, start in its max-context window, end >= start, length <=
`max_answer_length`; score = start + end logit. The word pieces are mapped back to the original
words, then to the exact original characters by aligning the basic-tokenised text with the
original text without spaces (the reference's get_final_text, with the same BasicTokenizer as
featurisation, so that e.g. a word-final capital sigma lowercases to the same letter on both
sides). v2.0: the null score is the minimum over windows of start[0] + end[0]; predict "" iff
null - best non-null > `null_score_diff_threshold`; `null_odds.json` holds that difference.

Scores are summed in float64 from the float32 logits and softmaxed term by term, as the reference
does with Python floats, so that ties, n-best order, probabilities and null odds are the same
numbers. Where the reference crashes (v2.0 with no non-null candidate left), the null odds are
`NO_NON_NULL_DIFF` and the prediction is "".
"""

from __future__ import annotations

import collections
import functools
import math
from collections.abc import Callable

import numpy as np

from bert_jax.atomic_write import write_json_atomic
from bert_jax.tasks.squad import SquadExample, SquadFeature
from bert_jax.tokenization import BasicTokenizer

NO_NON_NULL_DIFF = 1e6  # null odds when no non-null span survives the filters
_NULL_START = 1e6  # the reference's initial null score ("large and positive")


@functools.cache
def _basic_tokenizer(do_lower_case: bool) -> BasicTokenizer:
    return BasicTokenizer(do_lower_case)


def _without_spaces(text: str) -> tuple[str, list[int]]:
    kept = [(i, c) for i, c in enumerate(text) if c != " "]
    return "".join(c for _, c in kept), [i for i, _ in kept]


def final_text(pred_text: str, orig_text: str, do_lower_case: bool) -> str:
    """The span of `orig_text` that `pred_text` (normalised word pieces) came from."""
    tok_text = " ".join(_basic_tokenizer(do_lower_case).tokenize(orig_text))
    start = tok_text.find(pred_text)
    if start == -1:
        return orig_text
    end = start + len(pred_text) - 1
    orig_ns, orig_pos = _without_spaces(orig_text)
    tok_ns, tok_pos = _without_spaces(tok_text)
    if len(orig_ns) != len(tok_ns):  # normalisation changed the characters: give up, as ref
        return orig_text
    tok_to_ns = {p: i for i, p in enumerate(tok_pos)}
    if start not in tok_to_ns or end not in tok_to_ns:
        return orig_text
    return orig_text[orig_pos[tok_to_ns[start]] : orig_pos[tok_to_ns[end]] + 1]


def _top(logits: np.ndarray, n: int) -> list[int]:
    return [int(i) for i in np.argsort(-logits, kind="stable")[:n]]


def _softmax(scores: list[float]) -> list[float]:
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = 0.0
    for x in exps:  # left to right, as the reference (Python >= 3.12's sum() compensates)
        total += x
    return [x / total for x in exps]


def predict(
    examples: list[SquadExample],
    features: list[SquadFeature],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    *,
    version_2: bool,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    null_score_diff_threshold: float = 0.0,
    do_lower_case: bool = True,
    pieces_to_text: Callable[[list[str]], str] | None = None,
) -> tuple[dict[str, str], dict[str, list[dict]], dict[str, float]]:
    """-> (predictions qid -> text, n-best qid -> entries, null odds qid -> score diff).
    `pieces_to_text`: how a tokenizer other than WordPiece spells its pieces (sentencepiece,
    byte-level BPE); the spelled text is basic-tokenised as the original text is, so a span that
    starts or ends inside a word maps onto those characters too."""
    by_example = collections.defaultdict(list)
    for fi, feat in enumerate(features):
        by_example[feat.example_index].append(fi)
    predictions, nbest_all, null_odds = {}, {}, {}
    for ei, ex in enumerate(examples):
        prelim = []  # (score, feature index, start, end, start logit, end logit)
        null = (_NULL_START, None, 0, 0, 0.0, 0.0)
        for fi in by_example[ei]:
            feat = features[fi]
            s_log = np.asarray(start_logits[fi], np.float64)
            e_log = np.asarray(end_logits[fi], np.float64)
            if version_2 and s_log[0] + e_log[0] < null[0]:
                null = (float(s_log[0] + e_log[0]), fi, 0, 0, float(s_log[0]), float(e_log[0]))
            ends = _top(e_log, n_best_size)
            for s in _top(s_log, n_best_size):
                for e in ends:
                    ok = s in feat.token_to_orig_map and e in feat.token_to_orig_map
                    ok = ok and feat.token_is_max_context.get(s, False) and s <= e
                    if ok and e - s + 1 <= max_answer_length:
                        score = float(s_log[s] + e_log[e])
                        prelim.append((score, fi, s, e, float(s_log[s]), float(e_log[e])))
        if version_2:
            prelim.append(null)
        prelim.sort(key=lambda p: p[0], reverse=True)
        nbest, seen = [], set()
        for _score, fi, s, e, sl, el in prelim:
            if len(nbest) >= n_best_size:
                break
            text = ""
            if s > 0:
                feat = features[fi]
                if pieces_to_text is None:  # WordPiece, as the reference
                    pieces = " ".join(feat.tokens[s : e + 1]).replace(" ##", "").replace("##", "")
                    pieces = " ".join(pieces.split())
                else:
                    spelled = pieces_to_text(feat.tokens[s : e + 1])
                    pieces = " ".join(_basic_tokenizer(do_lower_case).tokenize(spelled))
                words = ex.doc_tokens[feat.token_to_orig_map[s] : feat.token_to_orig_map[e] + 1]
                text = final_text(pieces, " ".join(words), do_lower_case)
            if text in seen:
                continue
            seen.add(text)
            nbest.append({"text": text, "start_logit": sl, "end_logit": el})
        if version_2 and "" not in seen:
            nbest.append({"text": "", "start_logit": null[4], "end_logit": null[5]})
        if not nbest:
            nbest.append({"text": "empty", "start_logit": 0.0, "end_logit": 0.0})
        probs = _softmax([n["start_logit"] + n["end_logit"] for n in nbest])
        nbest = [  # the reference's key order: text, probability, start_logit, end_logit
            {"text": n.pop("text"), "probability": p, **n}
            for n, p in zip(nbest, probs, strict=True)
        ]
        nbest_all[ex.qas_id] = nbest
        best_non_null = next((n for n in nbest if n["text"]), None)
        if not version_2:
            predictions[ex.qas_id] = nbest[0]["text"]
            continue
        if best_non_null is None:
            diff = NO_NON_NULL_DIFF
        else:
            diff = null[0] - best_non_null["start_logit"] - best_non_null["end_logit"]
        null_odds[ex.qas_id] = float(diff)
        answer = best_non_null["text"] if best_non_null else ""
        predictions[ex.qas_id] = "" if diff > null_score_diff_threshold else answer
    return predictions, nbest_all, null_odds


def write_json(obj, path: str) -> None:
    write_json_atomic(path, obj, ensure_ascii=False)
