"""RoBERTa end to end: `build-vocab --kind=byte_bpe` on the embedded corpus -> a tiny random
RobertaForSequenceClassification written by transformers with that tokenizer -> fine-tuned by the
runner on an MRPC-layout task of real sentence pairs -> `bert-jax convert` -> transformers.

Checked against what we did not write: our byte-level BPE against transformers' RobertaTokenizer
(Fast) on real English text, the featurised pair `<s> A </s></s> B </s>` (padded with <pad>)
against what RobertaTokenizer(text_a, text_b) gives (NER/SQuAD words as is_split_into_words
gives them), and the converted model's logits against ours on identical weights. Also: the `base`
recipe's parameter count against RobertaForMaskedLM, DOC-SENTENCES packing against
FULL-SENTENCES, and pretraining shards written with the byte-level vocab."""

from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess
import sys

import numpy as np
import pytest
from test_family_recipes import _param_count

from bert_jax.corpus import embedded
from bert_jax.tokenization import ByteBpeTokenizer

ROOT = pathlib.Path(__file__).parent.parent
MAX_LEN = 64
VOCAB_SIZE = 1000


def _cli(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "bert_jax.cli", *args],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def documents() -> list[list[str]]:
    return list(embedded.iter_documents(max_documents=400))


@pytest.fixture(scope="module")
def vocab_dir(tmp_path_factory) -> pathlib.Path:
    """A byte-level BPE trained by the command on the embedded corpus."""
    out = tmp_path_factory.mktemp("roberta_vocab")
    stats = json.loads(
        _cli(
            "build-vocab",
            "--kind=byte_bpe",
            "--input_file=embedded:300",
            f"--vocab_size={VOCAB_SIZE}",
            f"--output_dir={out}",
        )
    )
    assert stats["vocab_size"] == VOCAB_SIZE and stats["kind"] == "byte_bpe"
    assert sorted(p.name for p in out.iterdir()) == ["merges.txt", "vocab.json", "vocab_stats.json"]
    return out


@pytest.fixture(scope="module")
def roberta_dir(tmp_path_factory, vocab_dir) -> pathlib.Path:
    """A tiny random RobertaForSequenceClassification + its tokenizer, saved by transformers
    (transformers 5 saves tokenizer.json only, so the runner reads that form here)."""
    import torch
    import transformers

    path = tmp_path_factory.mktemp("tiny_roberta")
    tok = transformers.RobertaTokenizerFast.from_pretrained(str(vocab_dir))
    tok.save_pretrained(path)
    torch.manual_seed(0)
    cfg = transformers.RobertaConfig(
        vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=MAX_LEN + 2, type_vocab_size=1,
        pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id, num_labels=2,
    )  # fmt: skip
    transformers.RobertaForSequenceClassification(cfg).save_pretrained(path)
    return path


def test_byte_bpe_matches_transformers_on_english(vocab_dir, documents):
    import transformers

    ours = ByteBpeTokenizer(vocab_dir / "vocab.json")
    theirs = transformers.RobertaTokenizerFast.from_pretrained(str(vocab_dir))
    lines = [s for doc in documents[300:400] for s in doc]  # text the vocab was not trained on
    lines += ["  Two  spaces, a tab\there, café naïve 日本語 🙂.", "x </s> y <mask> z", ""]
    ids = ours.encode_batch(lines)
    assert ids == [theirs(t, add_special_tokens=False)["input_ids"] for t in lines]
    assert [ours.tokenize(t) for t in lines[:50]] == [theirs.tokenize(t) for t in lines[:50]]
    assert sum(map(len, ids)) > 10 * len(lines)  # real text, not empty lines
    specials = ("cls_id", "sep_id", "pad_id", "unk_id", "mask_id")
    assert [getattr(ours, k) for k in specials] == [
        theirs.cls_token_id, theirs.sep_token_id, theirs.pad_token_id, theirs.unk_token_id,
        theirs.mask_token_id,
    ]  # fmt: skip
    assert ours.decode(ids[0]) == lines[0]  # byte-level: lossless
    assert len(ours) == len(theirs) == VOCAB_SIZE


def test_ner_and_squad_words_as_transformers_splits_them(vocab_dir):
    """NER and SQuAD tokenise words one by one; for byte-level BPE each gets the leading space
    transformers' RoBERTa tokenizer gives words with is_split_into_words (add_prefix_space)."""
    import transformers

    from bert_jax.tasks import ner, squad

    fix = ROOT / "tests" / "fixtures" / "tasks"
    ours = ByteBpeTokenizer(vocab_dir)  # the directory: finds vocab.json + merges.txt
    words_tok = transformers.RobertaTokenizerFast.from_pretrained(
        str(vocab_dir), add_prefix_space=True
    )
    sentences = ner.read_conll(str(fix / "conll2003" / "valid.txt"))[:20]
    arrays, windows = ner.featurize(sentences, ours, 128)
    assert len(windows) == len(sentences)  # every sentence fits one window here
    for i, sent in enumerate(sentences):
        enc = words_tok(list(sent.words), is_split_into_words=True)
        n = len(enc["input_ids"])
        assert arrays["input_ids"][i, :n].tolist() == enc["input_ids"]
        assert (arrays["input_ids"][i, n:] == ours.pad_id).all()
        first = [enc.word_ids().index(w) for w in range(len(sent.words))]
        assert list(windows[i].word_starts) == first

    examples, _ = squad.read_examples(str(fix / "squad" / "dev-v1.1.json"), False, False)
    ex = examples[0]
    arrays, feats = squad.featurize([ex], ours, max_seq_length=64, doc_stride=16,
                                    max_query_length=16)  # fmt: skip
    theirs = transformers.RobertaTokenizerFast.from_pretrained(str(vocab_dir))
    query = theirs(ex.question_text, add_special_tokens=False)["input_ids"][:16]
    context = words_tok(ex.doc_tokens, is_split_into_words=True, add_special_tokens=False)
    room = 64 - len(query) - 4
    assert len(feats) > 1 and arrays["input_ids"][0].tolist() == [
        ours.cls_id, *query, ours.sep_id, ours.sep_id, *context["input_ids"][:room], ours.sep_id
    ]  # fmt: skip
    # Predicted pieces spell their text as transformers decodes them (SQuAD answer strings).
    window = feats[0].tokens[len(query) + 3 : len(query) + 9]
    ids = theirs.convert_tokens_to_ids(window)
    assert ours.pieces_to_text(window) == theirs.decode(ids).strip()


def _write_mrpc(data: pathlib.Path, documents: list[list[str]]) -> list[tuple[str, str]]:
    """MRPC's layout from real text: label 1 = the next sentence of the same document, 0 = a
    sentence of another document."""
    rng = random.Random(0)
    docs = [[" ".join(s.split()) for s in d] for d in documents if len(d) >= 2]
    rows = []
    for i, doc in enumerate(docs[:64]):
        j = rng.randrange(len(doc) - 1)
        if i % 2:
            rows.append(("1", doc[j], doc[j + 1]))
        else:
            other = docs[(i + 17) % len(docs)]
            rows.append(("0", doc[j], other[rng.randrange(len(other))]))
    data.mkdir()
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    for name, part in (("train", rows[:48]), ("dev", rows[48:])):
        lines = [f"{y}\t{k}\t{k}\t{a}\t{b}\n" for k, (y, a, b) in enumerate(part)]
        (data / f"{name}.tsv").write_text(header + "".join(lines), encoding="utf-8")
    return [(a, b) for _, a, b in rows]


def test_roberta_finetune_and_convert(roberta_dir, documents, tmp_path):
    import torch
    import transformers

    from bert_jax.arch.bert.heads import BertForSequenceClassification
    from bert_jax.arch.bert.pretrained import load_pretrained
    from bert_jax.runs import finetune as runner
    from bert_jax.tasks.jobs import make_job
    from bert_jax.train.config import finetune_config

    pairs = _write_mrpc(tmp_path / "mrpc", documents)
    cfg = finetune_config("glue")
    cfg.task, cfg.init_checkpoint, cfg.data_dir = "mrpc", str(roberta_dir), str(tmp_path / "mrpc")
    cfg.max_seq_length, cfg.train_batch_size, cfg.eval_batch_size = MAX_LEN, 8, 8
    cfg.num_train_epochs, cfg.learning_rate, cfg.num_devices = 1.0, 1e-3, 1

    # The runner picks the byte-level BPE of the HF dir; its features are RoBERTa's pair format.
    tokenizer, pre, lower = runner._tokenizer_and_weights(cfg)
    assert isinstance(tokenizer, ByteBpeTokenizer) and lower is False
    assert pre.config.family == "roberta"
    job = make_job(cfg, do_lower_case=lower)
    job.load(tokenizer)
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(roberta_dir))
    a, b = zip(*pairs[:48], strict=True)
    enc = hf_tok(list(a), list(b), padding="max_length", truncation=True, max_length=MAX_LEN)
    np.testing.assert_array_equal(job.train["input_ids"], enc["input_ids"])
    np.testing.assert_array_equal(job.train["input_mask"], enc["attention_mask"])
    assert not job.train["segment_ids"].any()
    assert (job.train["input_mask"].sum(1) == MAX_LEN).any()  # some pairs were truncated
    row = job.train["input_ids"][0]
    n = int(job.train["input_mask"][0].sum())
    assert row[0] == tokenizer.cls_id and row[n - 1] == tokenizer.sep_id
    assert list(row).count(tokenizer.sep_id) == 3 and (row[n:] == tokenizer.pad_id).all()

    # extract-features frames the pair the same way.
    from bert_jax.features import extract, loading

    _, _, feat_tok = loading.load_encoder(roberta_dir)
    feats = extract.featurize([extract.Example(0, a[0], b[0])], MAX_LEN, feat_tok)
    np.testing.assert_array_equal(feats[0].input_ids, enc["input_ids"][0])

    work, out = tmp_path / "work", tmp_path / "hf"
    results = runner.finetune(cfg, str(work))
    saved = json.loads((work / "eval_results.json").read_text())
    assert 0.0 <= saved["accuracy"] <= 1.0 and saved == pytest.approx(results)
    assert "RobertaForSequenceClassification" in _cli(
        "convert", f"--init_checkpoint={work}", f"--output_dir={out}"
    )

    model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(out), output_loading_info=True
    )
    assert type(model).__name__ == "RobertaForSequenceClassification"
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    out_tok = transformers.AutoTokenizer.from_pretrained(str(out))
    a, b = pairs[50]
    short = ("A short sentence.", "Another one.")
    enc = out_tok([a, short[0]], [b, short[1]], padding=True, return_tensors="np")
    assert (
        enc["input_ids"].tolist() == hf_tok([a, short[0]], [b, short[1]], padding=True)["input_ids"]
    )
    with torch.no_grad():
        theirs = model(**{k: torch.tensor(v) for k, v in enc.items()}).logits.numpy()
    tuned = load_pretrained(work)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    ours = BertForSequenceClassification(tuned.config, 2).apply(
        {"params": tuned.params}, ids, mask, np.zeros_like(ids)
    )
    np.testing.assert_allclose(theirs, np.asarray(ours), atol=2e-5, rtol=1e-5)
    print("max |logits diff|:", float(np.abs(theirs - np.asarray(ours)).max()))


def test_doc_sentences_packs_within_documents(documents, uncased_vocab):
    """DOC-SENTENCES (objective doc_sentences) against FULL-SENTENCES on the same tokenised
    documents: both keep every token once, in order; only FULL-SENTENCES crosses documents."""
    from bert_jax import objectives
    from bert_jax.data.instances import InstanceConfig, Vocab, build_instances
    from bert_jax.tokenization import FullTokenizer

    tok = FullTokenizer(uncased_vocab)
    vocab = Vocab.from_token_dict(tok.vocab)
    docs = [tok.encode_batch(d) for d in documents[:60]]
    cfg = InstanceConfig(max_seq_length=48)
    built = {
        name: build_instances(objectives.get(name).pairing, docs, cfg, vocab, random.Random(0))
        for name in ("doc_sentences", "full_sentences")
    }
    flat = [t for d in docs for s in d for t in s]
    for name, instances in built.items():
        bodies = [i.input_ids[1:-1] for i in instances]
        assert all(i.input_ids[0] == vocab.cls_id and i.input_ids[-1] == vocab.sep_id
                   for i in instances)  # fmt: skip
        assert all(len(i.input_ids) <= 48 and not any(i.segment_ids) for i in instances)
        assert [t for b in bodies for t in b if t != vocab.sep_id] == flat, name
    crossing = {n: sum(vocab.sep_id in i.input_ids[1:-1] for i in v) for n, v in built.items()}
    assert crossing["doc_sentences"] == 0 < crossing["full_sentences"]
    # Each DOC-SENTENCES instance lies inside one document: a document's instances rebuild it.
    ends = 0
    for d in docs:
        ends += len(build_instances("packed_docs", [d], cfg, vocab, random.Random(0)))
    assert ends == len(built["doc_sentences"]) > len(built["full_sentences"])


def test_roberta_base_preset_has_transformers_parameter_count():
    """The `base` recipe builds RoBERTa-base: as many weights as transformers' RobertaForMaskedLM
    with roberta-base's config (vocab 50265, 514 positions, one token type)."""

    import torch
    import transformers

    from bert_jax.configs import roberta

    c = roberta.get_config("base")
    assert (c.objective, c.adam_b2, c.max_grad_norm, c.global_batch_size) == (
        "full_sentences", 0.98, 0.0, 8192,
    )  # fmt: skip
    ours, _ = _param_count(c)
    hf_config = transformers.RobertaConfig(
        vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, layer_norm_eps=1e-5
    )
    with torch.device("meta"):  # counts without allocating 125M weights
        theirs = sum(p.numel() for p in transformers.RobertaForMaskedLM(hf_config).parameters())
    assert ours == theirs and abs(ours / 1e6 - 124.7) < 0.1, (ours, theirs)
    assert roberta.get_config("cpu").model == "tiny"


def test_pretraining_data_from_the_byte_bpe_vocab(vocab_dir, tmp_path):
    """create-pretraining-data with vocab.json: FULL-SENTENCES rows `<s> ... </s>` of real
    sentences (a `</s>` between documents), masks never on specials; dynamic masking and the
    pretraining vocab size read the same file."""
    from bert_jax.data.pipeline import create_pretraining_data
    from bert_jax.input import PretrainInput
    from bert_jax.objectives.masking import MaskingSpec
    from bert_jax.tokenization.vocab import load_vocab

    vocab_file = str(vocab_dir / "vocab.json")
    tok = ByteBpeTokenizer(vocab_file)
    stats = create_pretraining_data(
        "embedded:30", str(tmp_path), vocab_file, num_shards=1, objective="full_sentences",
        max_seq_length=48, max_predictions_per_seq=8, dupe_factor=1,
    )  # fmt: skip
    assert stats["objective"] == "full_sentences"
    batch = next(PretrainInput(str(tmp_path / "*.tfrecord"), 16, 48, 8, prefetch=0,
                               objective="full_sentences"))  # fmt: skip
    text = "".join(s for d in embedded.iter_documents(max_documents=30) for s in d)
    specials = {tok.cls_id, tok.sep_id, tok.pad_id, tok.mask_id}
    for ids, mask, pos, orig, w in zip(
        batch["input_ids"], batch["input_mask"], batch["masked_lm_positions"],
        batch["masked_lm_ids"], batch["masked_lm_weights"], strict=True,
    ):  # fmt: skip
        n = int(mask.sum())
        row = ids[:n].copy()
        real = w > 0
        assert real.any() and not set(orig[real].tolist()) & specials
        row[pos[real]] = orig[real]
        assert row[0] == tok.cls_id and row[-1] == tok.sep_id
        pieces = tok.decode(row[1:-1]).split("</s>")
        assert all(p and p in text for p in pieces), pieces
    spec = MaskingSpec.from_vocab_file(vocab_file)
    assert spec.mask_id == tok.mask_id and spec.vocab_size == VOCAB_SIZE
    assert set(spec.special_ids) == {tok.cls_id, tok.sep_id, tok.pad_id}
    assert max(load_vocab(vocab_file).values()) + 1 == VOCAB_SIZE
