"""SQuAD EM/F1 exactly as the official evaluate-v1.1.py / evaluate-v2.0.py define them.

Our own implementation of the official algorithm: normalise (lowercase, drop ASCII punctuation,
drop the articles a/an/the as whole words, collapse whitespace); EM is string equality; F1 is the
bag-of-tokens overlap; each question takes the max over its gold answers; scores are means x 100.

The versions differ, and each is kept as its script has it:
- v1.1 scores a question without a prediction as 0 and counts it; F1 is 0 whenever nothing
  overlaps, even if prediction and gold both normalise to "" (EM is 1 then).
- v2.0 skips a question without a prediction (it is not in any total); F1 is 1 when both sides
  normalise to ""; gold answers that normalise to "" are dropped (none left: the gold is "");
  HasAns/NoAns split by whether the raw `answers` list is non-empty, so an answerable question
  whose golds all normalise to "" is HasAns; given null odds, the best threshold is swept.
  Where the script stops with a KeyError (a missing prediction, at its HasAns/NoAns split), the
  splits here are over the questions that have a prediction.
"""

from __future__ import annotations

import collections
import re
import string

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(s: str) -> str:
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def _overlap_f1(pred_toks: list[str], gold_toks: list[str]) -> float:
    same = sum((collections.Counter(pred_toks) & collections.Counter(gold_toks)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_toks), same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, gold: str) -> float:
    """evaluate-v1.1.py's F1: no overlap (including two empty answers) scores 0."""
    return _overlap_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def f1_score_v2(prediction: str, gold: str) -> float:
    """evaluate-v2.0.py's F1: if either side normalises to "", 1 iff both do."""
    pred_toks = normalize_answer(prediction).split()
    gold_toks = normalize_answer(gold).split()
    if not pred_toks or not gold_toks:
        return float(pred_toks == gold_toks)
    return _overlap_f1(pred_toks, gold_toks)


def _questions(dataset: list[dict]):
    for article in dataset:
        for para in article["paragraphs"]:
            yield from para["qas"]


def evaluate_v1(dataset: list[dict], predictions: dict[str, str]) -> dict[str, float]:
    """`dataset` is the JSON's "data" list. Unanswered questions score 0 (as the script)."""
    em = f1 = total = 0.0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue
        pred, golds = predictions[qa["id"]], [a["text"] for a in qa["answers"]]
        em += max(exact_match(pred, g) for g in golds)
        f1 += max(f1_score(pred, g) for g in golds)
    return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total}


def evaluate_v2(
    dataset: list[dict],
    predictions: dict[str, str],
    na_probs: dict[str, float] | None = None,
    na_prob_thresh: float = 1.0,
) -> dict[str, float]:
    """`na_probs`: null odds (or probabilities) per question; a question whose value exceeds
    `na_prob_thresh` counts as answered "". Without them every value is 0, as in the script."""
    has_ans = {qa["id"]: bool(qa["answers"]) for qa in _questions(dataset)}
    exact, f1 = _raw_scores(dataset, predictions)
    odds = na_probs if na_probs is not None else {q: 0.0 for q in predictions}
    thresh_exact, thresh_f1 = dict(exact), dict(f1)
    for qid in exact:
        if odds.get(qid, 0.0) > na_prob_thresh:
            thresh_exact[qid] = thresh_f1[qid] = float(not has_ans[qid])
    qids = list(exact)
    out = _means("", qids, thresh_exact, thresh_f1)
    out.update(_means("HasAns_", [q for q in qids if has_ans[q]], thresh_exact, thresh_f1))
    out.update(_means("NoAns_", [q for q in qids if not has_ans[q]], thresh_exact, thresh_f1))
    if na_probs is not None:
        out.update(_best_thresh(predictions, exact, f1, na_probs, has_ans))
    return out


def _raw_scores(dataset: list[dict], predictions: dict[str, str]) -> tuple[dict, dict]:
    """Per answered question: max EM and F1 over the golds that do not normalise to ""."""
    exact, f1 = {}, {}
    for qa in _questions(dataset):
        if qa["id"] not in predictions:
            continue
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        pred = predictions[qa["id"]]
        exact[qa["id"]] = max(exact_match(pred, g) for g in golds)
        f1[qa["id"]] = max(f1_score_v2(pred, g) for g in golds)
    return exact, f1


def _means(prefix: str, qids: list[str], exact: dict, f1: dict) -> dict[str, float]:
    if not qids:
        return {}
    n = len(qids)
    return {
        f"{prefix}exact": 100.0 * sum(exact[q] for q in qids) / n,
        f"{prefix}f1": 100.0 * sum(f1[q] for q in qids) / n,
        f"{prefix}total": float(n),
    }


def _best_thresh(
    predictions: dict[str, str], exact: dict, f1: dict, na_probs: dict[str, float], has_ans: dict
) -> dict[str, float]:
    """Sweep the null threshold over the observed odds (the official find_best_thresh)."""
    out = {}
    num_no_ans = sum(not v for v in has_ans.values())  # over the dataset, answered or not
    for name, scores in (("exact", exact), ("f1", f1)):
        cur = best = float(num_no_ans)
        best_thresh = 0.0
        for qid in sorted(na_probs, key=lambda k: na_probs[k]):
            if qid not in scores:
                continue
            # Answering qid instead of abstaining: an answerable one gains its score, an
            # unanswerable one with a non-empty prediction loses its point.
            cur += scores[qid] if has_ans[qid] else -float(bool(predictions[qid]))
            if cur > best:
                best, best_thresh = cur, na_probs[qid]
        out[f"best_{name}"] = 100.0 * best / len(scores)
        out[f"best_{name}_thresh"] = float(best_thresh)
    return out
