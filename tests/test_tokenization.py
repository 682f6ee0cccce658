"""FullTokenizer against transformers' BertTokenizerFast on the real uncased vocab, on MB of real
English text and on edge cases; plus the places where google-research/bert (which we follow)
and Hugging Face differ, each checked against BertTokenizerFast on text rewritten by hand the way
the reference treats it."""

from __future__ import annotations

import collections
import pathlib
import shutil

import pytest
from tokenizers import Tokenizer

from bert_jax.corpus import embedded as embedded_corpus
from bert_jax.errors import BertJaxError
from bert_jax.tokenization import (
    BasicTokenizer,
    FullTokenizer,
    WordpieceTokenizer,
    load_vocab,
    special_ids,
    unicode_classes,
)

CORPUS_BYTES = 2_000_000

EDGE_CASES = [
    "",
    "   ",
    "\n\n",
    "  leading and trailing spaces  ",
    "John Johanson's, house",
    "Héllo Wörld, café naïve Ångström façade Øresund",
    "ÀÉÎÕÜ àéîõü ÇÑ çñ ß ẞ İstanbul ǅ ﬁ ﬂ",
    "中文字符测试 日本語のテキスト 한국어 텍스트 漢字かな交じり文",
    "I ❤️ 🤗 tokenizers 👍🏽 👨‍👩‍👧 🇫🇷 ☃ ★",
    "tab\there\nnewline\r\ncarriage\rreturn",
    "control\x01\x02\x07\x1b[0m chars\x7f\x85 and\u200b zero\u200dwidth\ufeff bom",
    "nul\x00byte and replacement\ufffdchar",
    "nbsp\u00a0thin\u2009ideographic\u3000space\u2028line\u2029para",
    "$^`~|\\ ¿¡ «quoted» — dash … ellipsis • bullet ‘single’ “double”",
    "3.14159 1,000,000 2024-01-01 12:30pm 50% #1 @user user@example.com",
    "https://example.com/path?query=1&x=y#frag",
    "don't won't it's O'Neill rock'n'roll",
    "αβγ ΑΒΓ Ωμέγα Ελληνικά кириллица Кириллица עברית العربية हिन्दी ไทย",
    "a" * 99,
    "b" * 100,
    "c" * 101,
    "word " + "x" * 150 + " after",
    "word " + "y" * 250 + " after",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "UNwant\u00e9d,running",
    "e\u0301 a\u0308 combining marks n\u0303",
    "\u00ad soft hyphen and \u2060 word joiner",
]


def _hf_tokenizer(vocab_file: pathlib.Path, tmp_dir: pathlib.Path, do_lower_case: bool):
    from transformers import BertTokenizerFast

    # A directory holding only vocab.txt: BertTokenizerFast builds its pipeline from it.
    shutil.copy(vocab_file, tmp_dir / "vocab.txt")
    return BertTokenizerFast.from_pretrained(str(tmp_dir), do_lower_case=do_lower_case)


@pytest.fixture(scope="module")
def corpus_lines(tmp_path_factory) -> list[str]:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    stats = embedded_corpus.write_corpus(path, max_bytes=CORPUS_BYTES)
    assert stats["bytes"] > 0.9 * CORPUS_BYTES
    return path.read_text(encoding="utf-8").split("\n")


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def pair(request, uncased_vocab, tmp_path_factory):
    lower = request.param
    hf = _hf_tokenizer(uncased_vocab, tmp_path_factory.mktemp("hf"), lower)
    return FullTokenizer(uncased_vocab, do_lower_case=lower, max_input_chars_per_word=100), hf


def test_ids_match_bert_tokenizer_fast_on_megabytes_of_english(pair, corpus_lines):
    ours, hf = pair
    ours_ids = ours.encode_batch(corpus_lines)
    hf_ids = hf(corpus_lines, add_special_tokens=False)["input_ids"]
    mismatched = [i for i, (a, b) in enumerate(zip(ours_ids, hf_ids, strict=True)) if a != b]
    assert not mismatched, [corpus_lines[i] for i in mismatched[:3]]
    tokens = sum(map(len, ours_ids))
    assert tokens > 400_000
    if ours.do_lower_case:  # the uncased vocab covers English docstrings well
        assert sum(ids.count(ours.unk_id) for ids in ours_ids) / tokens < 0.001


def test_edge_cases_match_bert_tokenizer_fast(pair):
    ours, hf = pair
    for text in EDGE_CASES:
        assert ours.tokenize(text) == hf.tokenize(text), repr(text)
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False), repr(text)
    assert ours.encode_batch(EDGE_CASES) == hf(EDGE_CASES, add_special_tokens=False)["input_ids"]


def test_reference_example_with_toy_vocab(tmp_path):
    # The example in google-research/bert's tokenization_test.py.
    vocab = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = FullTokenizer(tmp_path / "vocab.txt", do_lower_case=True)
    tokens = tok.tokenize("UNwant\u00e9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tok.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
    assert tok.convert_ids_to_tokens([7, 4, 5, 10, 8, 9]) == tokens
    assert tok.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
    assert tok.tokenize(b"UNwant\xc3\xa9d\xff") == ["un", "##want", "##ed"]  # bytes: UTF-8, ignore


def test_reference_basic_and_wordpiece_stages(uncased_vocab):
    # Examples from google-research/bert's tokenization_test.py.
    text = " \tHeLLo!how  \n Are yoU?  "
    assert BasicTokenizer(True).tokenize(text) == ["hello", "!", "how", "are", "you", "?"]
    assert BasicTokenizer(True).tokenize("H\u00e9llo") == ["hello"]
    assert BasicTokenizer(False).tokenize(text) == ["HeLLo", "!", "how", "Are", "yoU", "?"]
    assert BasicTokenizer(True).tokenize("ah\u535a\u63a8zz") == ["ah", "\u535a", "\u63a8", "zz"]
    vocab = {t: i for i, t in enumerate(["[UNK]", "want", "##want", "##ed", "wa", "un", "runn"])}
    vocab["##ing"] = 7
    wordpiece = WordpieceTokenizer(vocab)
    assert wordpiece.tokenize("") == []
    assert wordpiece.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert wordpiece.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
    # FullTokenizer is the two stages in sequence.
    full = FullTokenizer(uncased_vocab)
    for text in EDGE_CASES:
        basic = full.basic_tokenizer.tokenize(text)
        assert full.tokenize(text) == full.wordpiece_tokenizer.tokenize(" ".join(basic))


def test_long_word_limit_is_200_by_default_as_in_the_reference(uncased_vocab, tmp_path):
    hf = _hf_tokenizer(uncased_vocab, tmp_path, True)  # Hugging Face's limit is 100
    ours = FullTokenizer(uncased_vocab)
    assert ours.max_input_chars_per_word == 200
    word_150, word_200, word_201 = "ab" * 75, "ab" * 100, "ab" * 100 + "a"
    assert hf.tokenize(word_150) == ["[UNK]"]
    # Hugging Face's pipeline with the reference's limit.
    hf_200 = Tokenizer.from_str(hf.backend_tokenizer.to_str())
    hf_200.model.max_input_chars_per_word = 200
    for text in (word_150, word_200, f"x {word_201} y", "c" * 199 + " " + "d" * 200):
        assert ours.tokenize(text) == hf_200.encode(text, add_special_tokens=False).tokens
    assert len(ours.tokenize(word_200)) > 1
    assert ours.tokenize(f"x {word_201} y") == ["x", "[UNK]", "y"]


def test_where_hugging_face_differs_we_follow_the_reference(uncased_vocab, tmp_path):
    hf = _hf_tokenizer(uncased_vocab, tmp_path, True)
    ours = FullTokenizer(uncased_vocab)
    # Private-use and unassigned characters: the reference only drops Cc/Cf, so the word they
    # are in becomes [UNK]; tokenizers' clean_text drops them.
    assert ours.tokenize("the a\ue000b cat") == ["the", "[UNK]", "cat"]
    assert ours.tokenize("the a\U000e0080b cat") == ["the", "[UNK]", "cat"]
    assert hf.tokenize("the a\ue000b cat") == hf.tokenize("the ab cat")
    # A lone surrogate (possible in a Python string) stays in its word: [UNK].
    assert ours.tokenize("the a\ud800b cat") == ["the", "[UNK]", "cat"]
    assert ours.encode_batch(["ok", "x\udfff"]) == [ours.encode("ok"), [ours.unk_id]]
    # Python's str.lower() gives final sigma at the end of a word.
    assert ours.tokenize("ΟΔΟΣ ΣΑΣ. Σ") == hf.tokenize("οδος σας. σ")
    # CJK Extension E U+2B820.. is isolated by the reference; tokenizers' table starts at 2B920.
    assert ours.tokenize("a\U0002b820b") == hf.tokenize("a \U0002b820 b")
    # Punctuation and nonspacing marks newer than tokenizers' Unicode tables.
    assert ours.tokenize("a\u2e43b") == hf.tokenize("a \u2e43 b")
    assert ours.tokenize("e\u1abfx") == hf.tokenize("ex")
    # Special tokens cannot come through raw text in the reference.
    assert ours.tokenize("a [MASK] b [CLS]") == ["a", "[", "mask", "]", "b", "[", "cl", "##s", "]"]


def test_stored_unicode_tables_match_this_python():
    assert unicode_classes.tables() == unicode_classes.compute_tables()


def test_vocab_reading_follows_the_reference(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\r\n[UNK]\r\n  hello  \n[CLS]\n[SEP]\n[MASK]\nhello\n\n##lo")
    vocab = load_vocab(path)
    assert isinstance(vocab, collections.OrderedDict)
    # stripped; a repeated token keeps its last id; an empty line is the token "".
    assert vocab == {
        "[PAD]": 0,
        "[UNK]": 1,
        "hello": 6,
        "[CLS]": 3,
        "[SEP]": 4,
        "[MASK]": 5,
        "": 7,
        "##lo": 8,
    }
    ids = special_ids(vocab, path)
    assert (ids.pad, ids.unk, ids.cls, ids.sep, ids.mask) == (0, 1, 3, 4, 5)
    tok = FullTokenizer(path)
    assert tok.inv_vocab[6] == "hello" and len(tok) == 8
    assert tok.tokenize("Hello hello") == ["hello", "hello"]


def test_bad_vocab_files_raise_clear_errors(tmp_path):
    with pytest.raises(BertJaxError, match="missing.txt: vocab file not found"):
        FullTokenizer(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(BertJaxError, match="empty.txt: vocab file is empty"):
        FullTokenizer(tmp_path / "empty.txt")
    (tmp_path / "nounk.txt").write_text("[PAD]\nhello\n")
    with pytest.raises(BertJaxError, match=r"nounk.txt: vocab lacks \[UNK\]"):
        FullTokenizer(tmp_path / "nounk.txt")
    (tmp_path / "nomask.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    with pytest.raises(BertJaxError, match=r"nomask.txt: vocab lacks \[MASK\]"):
        special_ids(load_vocab(tmp_path / "nomask.txt"), tmp_path / "nomask.txt")
    tok = FullTokenizer(tmp_path / "nomask.txt")
    with pytest.raises(BertJaxError, match="'world' is not in the vocab"):
        tok.convert_tokens_to_ids(["hello", "world"])
    with pytest.raises(BertJaxError, match="id 99 is outside the vocab"):
        tok.convert_ids_to_tokens([1, 99])
