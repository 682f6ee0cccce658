"""SQuAD v1.1/v2.0: JSON reader and the reference featurisation (sliding windows over the context).

Reading (as run_squad.py): the context is split on whitespace into words with a char -> word map;
a training answer's word span is the words holding the characters `answer_start` and
`answer_start + len(text) - 1`. The answer is kept when those words contain its text (whitespace
normalised), even if `answer_start` points inside a word or a few characters off, as the
reference keeps it; otherwise it is skipped with a warning and counted in `ReadStats`, again as the
reference does. Not reference behaviour, on request: `skip_misaligned=True` also skips answers
whose text is not exactly at `answer_start` (or is empty), and `strict=True` raises instead of
skipping, naming the file and question id. An offset outside the context is always skipped (the
reference crashes on it). Questions longer than `max_query_length` word pieces are truncated and
counted.

Featurisation: `[CLS] query [SEP] window [SEP]` (the tokenizer's layout: RoBERTa `<s> query
</s></s> window </s>`, words tokenised with a leading space); windows of `max_seq_length -
len(query) - 3` (RoBERTa: 4) pieces start every `doc_stride` pieces (a context without pieces has
no windows); each piece counts only in the window where it has the most context (min(left, right) +
0.01 * window length). Training targets are the answer's piece positions, or 0 ([CLS]) when the
window does not contain the whole answer or there is none.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import numpy as np

from bert_jax.errors import BertJaxError
from bert_jax.tasks.text_pairs import Tokenizer, pack
from bert_jax.tokenization.layout import layout_of

_WHITESPACE = {" ", "\t", "\r", "\n", "\u202f"}


@dataclasses.dataclass
class SquadExample:
    qas_id: str
    question_text: str
    doc_tokens: list[str]
    orig_answer_text: str = ""
    start_position: int = -1  # word index (training only)
    end_position: int = -1
    is_impossible: bool = False


@dataclasses.dataclass
class ReadStats:
    questions: int = 0
    skipped_bad_answer: int = 0
    truncated_questions: int = 0
    features: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class SquadFeature:
    example_index: int
    tokens: list[str]
    token_to_orig_map: dict[int, int]  # piece position -> word index in the context
    token_is_max_context: dict[int, bool]


def split_on_whitespace(text: str) -> tuple[list[str], list[int]]:
    """Words of `text` and, for every character, the index of the word it belongs to."""
    words: list[str] = []
    char_to_word: list[int] = []
    prev_space = True
    for ch in text:
        if ch in _WHITESPACE:
            prev_space = True
        else:
            if prev_space:
                words.append(ch)
            else:
                words[-1] += ch
            prev_space = False
        char_to_word.append(len(words) - 1)
    return words, char_to_word


def load_dataset(path: str) -> list[dict]:
    """The JSON's "data" list (articles)."""
    if not os.path.exists(path):
        raise BertJaxError(f"{path}: no such file")
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except json.JSONDecodeError as e:
        raise BertJaxError(f"{path}: line {e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        raise BertJaxError(f"{path}: expected a SQuAD JSON object with a 'data' list")
    return obj["data"]


def read_examples(
    path: str,
    is_training: bool,
    version_2: bool,
    strict: bool = False,
    skip_misaligned: bool = False,
) -> tuple[list[SquadExample], ReadStats]:
    stats = ReadStats()
    examples = []
    for a, article in enumerate(load_dataset(path)):
        for p, para in enumerate(paragraphs_of(article, f"{path}: data[{a}]")):
            where = f"{path}: data[{a}].paragraphs[{p}]"
            context = _field(para, "context", str, where)
            words, char_to_word = split_on_whitespace(context)
            for q, qa in enumerate(_field(para, "qas", list, where)):
                stats.questions += 1
                at = f"{where}.qas[{q}]"
                qid = str(_field(qa, "id", object, at))
                ex = SquadExample(qid, _field(qa, "question", str, at), words)
                ex.is_impossible = bool(version_2 and qa.get("is_impossible", False))
                answers = answers_of(qa, f"{path}: question {qid}")  # dev: scored by them later
                if is_training and not ex.is_impossible:
                    if not answers:
                        raise BertJaxError(f"{path}: question {qid}: no answers")
                    answer = answers[0]
                    problem = _locate_answer(ex, answer, context, char_to_word, skip_misaligned)
                    if problem:
                        if strict:
                            raise BertJaxError(f"{path}: question {qa['id']}: {problem}")
                        logging.warning("%s: question %s: %s; skipped", path, qa["id"], problem)
                        stats.skipped_bad_answer += 1
                        continue
                examples.append(ex)
    if is_training and not examples and stats.questions:
        raise BertJaxError(
            f"{path}: no usable training example: all {stats.skipped_bad_answer} answers were "
            "skipped (answer_start outside the context, not a number, or misaligned)"
        )
    return examples, stats


def paragraphs_of(article: object, where: str) -> list:
    """An article's `paragraphs` (absent: none); anything but a list would be iterated by
    character, and its first "paragraph" reported as missing its context."""
    if not isinstance(article, dict):
        raise BertJaxError(
            f'{where} is a {type(article).__name__}, expected an object {{"paragraphs": [...]}}'
        )
    paragraphs = article.get("paragraphs", [])
    if not isinstance(paragraphs, list):
        raise BertJaxError(
            f"{where}.paragraphs is a {type(paragraphs).__name__}, expected a list of "
            '{"context": ..., "qas": [...]} objects'
        )
    return paragraphs


def answers_of(qa: dict, where: str) -> list[dict]:
    """A question's `answers`: a list of {"text", "answer_start"} objects (absent: none)."""
    answers = qa.get("answers", [])
    if not isinstance(answers, list) or not all(isinstance(a, dict) for a in answers):
        got = type(answers).__name__ if not isinstance(answers, list) else "list of non-objects"
        raise BertJaxError(
            f"{where}: 'answers' is a {got}, expected a list of "
            '{"text": ..., "answer_start": ...} objects'
        )
    return answers


def _field(obj: object, key: str, kind: type, where: str):
    """obj[key] of the expected JSON type, or a one-line error naming where it is missing."""
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind):
        got = "missing" if value is None else f"a {type(value).__name__}"
        raise BertJaxError(f"{where}: '{key}' is {got}, expected a {kind.__name__}")
    return value


def _locate_answer(
    ex: SquadExample, answer: dict, context: str, char_to_word: list[int], exact: bool
) -> str:
    """Set the answer's word span on `ex`; return a description of the problem, or ""."""
    text, start = answer.get("text"), answer.get("answer_start")
    if not isinstance(text, str):
        return "answer has no 'text'"
    try:
        start = int(start)
    except (TypeError, ValueError):
        return f"answer_start {start!r} is not a number"
    if not 0 <= start < len(context) or start + len(text) > len(context):
        return f"answer_start {start} with text {text!r} is outside the context"
    found = context[start : start + len(text)]
    if exact and (not text or found != text):
        return f"answer {text!r} is not at offset {start} (found {found!r})"
    ex.orig_answer_text = text
    ex.start_position = char_to_word[start]
    # As the reference: an empty text ends one character before it starts.
    ex.end_position = char_to_word[start + len(text) - 1]
    recovered = " ".join(ex.doc_tokens[ex.start_position : ex.end_position + 1])
    if " ".join(text.split()) not in recovered:
        return f"answer {text!r} not recoverable from the context words ({recovered!r})"
    return ""


def _improve_span(pieces: list[str], start: int, end: int, tokenizer, answer: str):
    """The tightest piece span whose text equals the tokenised answer (e.g. '1895' in '(1895)')."""
    target = " ".join(tokenizer.tokenize(layout_of(tokenizer).word_prefix + answer))
    for s in range(start, end + 1):
        for e in range(end, s - 1, -1):
            if " ".join(pieces[s : e + 1]) == target:
                return s, e
    return start, end


def _max_context(spans: list[tuple[int, int]], span_index: int, position: int) -> bool:
    best, best_index = None, None
    for i, (start, length) in enumerate(spans):
        end = start + length - 1
        if start <= position <= end:
            score = min(position - start, end - position) + 0.01 * length
            if best is None or score > best:
                best, best_index = score, i
    return best_index == span_index


def featurize(
    examples: list[SquadExample],
    tokenizer: Tokenizer,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    is_training: bool = False,
    stats: ReadStats | None = None,
) -> tuple[dict[str, np.ndarray], list[SquadFeature]]:
    layout = layout_of(tokenizer)
    overhead = layout.pair_overhead()  # [CLS] q [SEP] d [SEP]: 3; <s> q </s></s> d </s>: 4
    if max_seq_length <= max_query_length + overhead:
        raise BertJaxError(
            f"max_seq_length {max_seq_length} must exceed max_query_length {max_query_length} "
            f"+ {overhead}"
        )
    stats = stats or ReadStats()
    rows: dict[str, list] = {k: [] for k in ("input_ids", "input_mask", "segment_ids")}
    rows |= {"start_positions": [], "end_positions": []}
    metas: list[SquadFeature] = []
    for ex_index, ex in enumerate(examples):
        query = tokenizer.tokenize(ex.question_text)
        if len(query) > max_query_length:
            stats.truncated_questions += 1
            query = query[:max_query_length]
        piece_to_word, word_to_piece, pieces = [], [], []
        for w, word in enumerate(ex.doc_tokens):
            word_to_piece.append(len(pieces))
            for p in tokenizer.tokenize(layout.word_prefix + word):
                piece_to_word.append(w)
                pieces.append(p)
        tok_start = tok_end = -1
        if is_training and not ex.is_impossible:
            tok_start = word_to_piece[ex.start_position]
            last = ex.end_position + 1 < len(ex.doc_tokens)
            tok_end = word_to_piece[ex.end_position + 1] - 1 if last else len(pieces) - 1
            tok_start, tok_end = _improve_span(
                pieces, tok_start, tok_end, tokenizer, ex.orig_answer_text
            )
        max_doc = max_seq_length - len(query) - overhead
        spans, offset = [], 0
        while offset < len(pieces):
            length = min(len(pieces) - offset, max_doc)
            spans.append((offset, length))
            if offset + length == len(pieces):
                break
            offset += min(length, doc_stride)
        for si, (start, length) in enumerate(spans):
            base = len(query) + overhead - 1  # [CLS] query [SEP]
            window = pieces[start : start + length]
            ids, mask, seg = pack(tokenizer, query, window, max_seq_length)
            to_orig = {base + i: piece_to_word[start + i] for i in range(length)}
            is_max = {base + i: _max_context(spans, si, start + i) for i in range(length)}
            tokens = [layout.cls, *query, *layout.pair_sep, *window, layout.sep]
            s_pos = e_pos = 0
            if tok_start >= 0 and start <= tok_start and tok_end <= start + length - 1:
                s_pos, e_pos = tok_start - start + base, tok_end - start + base
            for k, v in (("input_ids", ids), ("input_mask", mask), ("segment_ids", seg)):
                rows[k].append(v)
            rows["start_positions"].append(s_pos)
            rows["end_positions"].append(e_pos)
            metas.append(SquadFeature(ex_index, tokens, to_orig, is_max))
    stats.features += len(metas)
    arrays = {k: np.asarray(v, np.int32) for k, v in rows.items()}
    if not metas:
        arrays = {k: np.zeros((0, max_seq_length), np.int32) for k in rows}
        arrays |= {k: np.zeros(0, np.int32) for k in ("start_positions", "end_positions")}
    return arrays, metas
