"""A Hugging Face directory of every family we load (BERT, RoBERTa, ALBERT, ELECTRA, DistilBERT,
XLNet, T5), written by transformers with real tokenizer files, through extract-features,
attention-map, convert and finetune, each checked against transformers:

- extract-features: our tokens are transformers' tokenizer's and our vectors its hidden states;
- attention-map: our probabilities are its attentions (XLNet and T5: refused by name);
- convert: the export loads in transformers with the source's logits and tokenizer ids;
- finetune (2-3 steps): the fine-tuned workdir converts to transformers' task class, whose
  predictions on the dev split are the ones the run wrote.

The tokenizers are the ones a user meets: BERT keeps vocab.txt beside tokenizer.json (as on the
Hub), ELECTRA and DistilBERT have tokenizer.json alone (what transformers v5 saves), ALBERT has
spiece.model + tokenizer.json, RoBERTa a byte-level BPE tokenizer.json built with `tokenizers`,
XLNet and T5 spiece.model + tokenizer.json. Each family's directory is built once per module.
"""

from __future__ import annotations

import io
import json
import pathlib
import shutil

import numpy as np
import pytest

from bert_jax.corpus import embedded
from bert_jax.errors import BertJaxError
from bert_jax.features.commands import attention_map, extract_features
from bert_jax.runs import finetune as runner
from bert_jax.runs.export import convert_any
from bert_jax.train.config import finetune_config

FIX = pathlib.Path(__file__).parent / "fixtures" / "tasks"
FAMILIES = ("bert", "roberta", "albert", "electra", "distilbert", "xlnet", "t5")
LINES = ["The cat sat on the mat in 1999.", "Who wrote it? ||| Nobody knows, really."]
TINY = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)


def _sentences() -> list[str]:
    return [s for doc in embedded.iter_documents(max_documents=200) for s in doc]


def _spm(control: str, **kw) -> bytes:
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_sentences()), model_writer=model, vocab_size=600,
        model_type="unigram", control_symbols=control, num_threads=1, minloglevel=2, **kw,
    )  # fmt: skip
    return model.getvalue()


def _pieces(model_file: pathlib.Path) -> list[tuple[str, float]]:
    import sentencepiece as spm

    proc = spm.SentencePieceProcessor(model_file=str(model_file))
    return [(proc.IdToPiece(i), proc.GetScore(i)) for i in range(proc.GetPieceSize())]


def _roberta_tokenizer(d: pathlib.Path):
    """A byte-level BPE tokenizer.json trained by `tokenizers`, saved as RobertaTokenizer."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )  # fmt: skip
    tok.train_from_iterator(_sentences(), trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return transformers.RobertaTokenizer(tokenizer_object=tok)


def _build(family: str, d: pathlib.Path, uncased_vocab: pathlib.Path) -> None:
    """Write `family`'s directory into `d`: model by transformers, tokenizer files."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    if family in ("bert", "electra", "distilbert"):
        tok_cls = {"bert": tf.BertTokenizer, "electra": tf.ElectraTokenizer,
                   "distilbert": tf.DistilBertTokenizer}[family]  # fmt: skip
        tok_cls(vocab=str(uncased_vocab)).save_pretrained(d)  # tokenizer.json alone
        if family == "bert":
            shutil.copy(uncased_vocab, d / "vocab.txt")
            model = tf.BertForMaskedLM(tf.BertConfig(vocab_size=30522, **TINY))
        elif family == "electra":
            cfg = tf.ElectraConfig(vocab_size=30522, embedding_size=16, **TINY)
            model = tf.ElectraForPreTraining(cfg)
        else:
            cfg = tf.DistilBertConfig(vocab_size=30522, dim=32, n_layers=1, n_heads=2,
                                      hidden_dim=64)  # fmt: skip
            model = tf.DistilBertForMaskedLM(cfg)
    elif family == "roberta":
        tok = _roberta_tokenizer(d)
        tok.save_pretrained(d)
        cfg = tf.RobertaConfig(vocab_size=len(tok), max_position_embeddings=130, **TINY)
        model = tf.RobertaForMaskedLM(cfg)
    elif family == "albert":
        (d / "spiece.model").write_bytes(
            _spm("[CLS],[SEP],[MASK]", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1)
        )
        tok = tf.AlbertTokenizer(vocab=_pieces(d / "spiece.model"), unk_token="<unk>")
        tok.save_pretrained(d)
        cfg = tf.AlbertConfig(vocab_size=600, embedding_size=16, **TINY)
        model = tf.AlbertForMaskedLM(cfg)
    elif family == "xlnet":
        (d / "spiece.model").write_bytes(_spm("<cls>,<sep>,<pad>,<mask>,<eod>,<eop>"))
        tf.XLNetTokenizer(vocab=_pieces(d / "spiece.model")).save_pretrained(d)
        cfg = tf.XLNetConfig(vocab_size=600, d_model=32, n_layer=1, n_head=4, d_inner=64)
        model = tf.XLNetLMHeadModel(cfg)
    else:
        from bert_jax.tokenization.t5_vocab import T5Vocab, train_t5_spm

        vocab = T5Vocab(train_t5_spm(_sentences(), d, 400))
        tf.T5Tokenizer(vocab=_pieces(d / "spiece.model"), extra_ids=100).save_pretrained(d)
        cfg = tf.T5Config(
            vocab_size=vocab.pieces + 100, d_model=32, d_kv=8, d_ff=64, num_layers=1,
            num_heads=4, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
            dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
        )  # fmt: skip
        model = tf.T5ForConditionalGeneration(cfg)
    with torch.no_grad():  # away from the init, so that the checks below see real weights
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(d)


@pytest.fixture(scope="module")
def family_dir(tmp_path_factory, uncased_vocab):
    built: dict[str, pathlib.Path] = {}

    def get(family: str) -> pathlib.Path:
        if family not in built:
            d = tmp_path_factory.mktemp(f"hf_{family}")
            _build(family, d, uncased_vocab)
            built[family] = d
        return built[family]

    return get


def _hf_model(directory: pathlib.Path, **kw):
    import transformers

    arch = json.loads((directory / "config.json").read_text())["architectures"][0]
    return getattr(transformers, arch).from_pretrained(directory, **kw).eval()


def _hf_tokenizer(directory: pathlib.Path):
    import transformers

    return transformers.AutoTokenizer.from_pretrained(str(directory))


def _encode(tok, line: str) -> dict:
    parts = line.split(" ||| ")
    return tok(*parts, return_tensors="pt", return_token_type_ids=True)


def _base_model(model):
    return getattr(model, model.base_model_prefix)


def _check_extract(family: str, d: pathlib.Path, tmp: pathlib.Path) -> None:
    import torch

    (tmp / "in.txt").write_text("\n".join(LINES) + "\n")
    n = extract_features(str(d), tmp / "in.txt", tmp / "out.jsonl", [-1], 48, 8)
    assert n == len(LINES)
    rows = [json.loads(x) for x in (tmp / "out.jsonl").read_text().splitlines()]
    tok, model = _hf_tokenizer(d), _base_model(_hf_model(d))
    for row, line in zip(rows, LINES, strict=True):
        enc = _encode(tok, line)
        if family == "distilbert":
            enc.pop("token_type_ids")
        # By id: sentencepiece spells an unknown piece as its text, transformers as <unk>.
        tokens = [t["token"] for t in row["features"]]
        assert tok.convert_tokens_to_ids(tokens) == enc["input_ids"][0].tolist(), family
        with torch.no_grad():
            hidden = model(**enc, output_hidden_states=True).hidden_states
        ours = np.asarray([t["layers"][0]["values"] for t in row["features"]])
        np.testing.assert_allclose(ours, hidden[-1][0].numpy(), atol=2e-4, rtol=1e-3)


def _check_attention(family: str, d: pathlib.Path) -> None:
    import torch

    text_a, text_b = LINES[1].split(" ||| ")
    tokens, probs_LxL, layer, _ = attention_map(str(d), text_a, text_b, -1, 1)
    assert layer == 0
    tok, model = _hf_tokenizer(d), _base_model(_hf_model(d, attn_implementation="eager"))
    enc = _encode(tok, LINES[1])
    if family == "distilbert":
        enc.pop("token_type_ids")
    assert tok.convert_tokens_to_ids(tokens) == enc["input_ids"][0].tolist()
    with torch.no_grad():
        theirs = model(**enc, output_attentions=True).attentions[-1][0, 1].numpy()
    np.testing.assert_allclose(probs_LxL, theirs, atol=2e-5)


def _check_convert(family: str, d: pathlib.Path, out: pathlib.Path) -> None:
    import torch

    lines = convert_any(str(d), str(out))
    assert lines[0].startswith(f"wrote {out}"), lines
    source, exported = _hf_model(d), _hf_model(out)
    assert type(source) is type(exported)
    ids = torch.tensor([[5, 17, 42, 99, 7, 3]])
    with torch.no_grad():
        if family == "t5":
            a = source(input_ids=ids, decoder_input_ids=ids[:, :3]).logits
            b = exported(input_ids=ids, decoder_input_ids=ids[:, :3]).logits
        else:
            a, b = source(input_ids=ids)[0], exported(input_ids=ids)[0]
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
    text = "The cat sat on the mat, in 1999."
    assert _hf_tokenizer(out)(text)["input_ids"] == _hf_tokenizer(d)(text)["input_ids"]


def _finetune_config(family: str, d: pathlib.Path):
    task = "ner" if family in ("electra", "distilbert") else "glue"
    cfg = finetune_config(task)
    if task == "glue":
        cfg.task, cfg.data_dir, cfg.num_train_epochs = "sst2", str(FIX / "glue" / "sst2"), 1.0
    else:
        cfg.data_dir, cfg.num_train_epochs = str(FIX / "conll2003"), 1.0
    cfg.init_checkpoint, cfg.max_seq_length, cfg.num_devices = str(d), 32, 1
    cfg.train_batch_size, cfg.eval_batch_size, cfg.learning_rate = 2, 4, 1e-3
    if family == "t5":
        cfg.max_target_length = 4
    return cfg


def _check_finetune(family: str, d: pathlib.Path, tmp: pathlib.Path) -> None:
    import torch

    cfg = _finetune_config(family, d)
    work, out = tmp / "work", tmp / "exported"
    results = runner.finetune(cfg, str(work))
    assert results["train_steps"] == 2
    assert all(np.isfinite(v) for v in results.values())
    convert_any(str(work), str(out))
    model = _hf_model(out)
    tok = _hf_tokenizer(d)
    if family == "t5":  # the run's decoded outputs are transformers' greedy ones (after 2 steps
        # often sentinels, so both are spelled by our T5Vocab)
        from bert_jax.tokenization.t5_vocab import T5Vocab

        rows = [json.loads(x) for x in (work / "dev_predictions.jsonl").read_text().splitlines()]
        enc = tok([r["input"] for r in rows], padding=True, return_tensors="pt")
        with torch.no_grad():
            gen = model.generate(**enc, max_new_tokens=4, do_sample=False, num_beams=1)
        vocab = T5Vocab.for_model(d / "spiece.model", model.config.vocab_size)
        assert [vocab.decode(ids) for ids in gen.tolist()] == [r["output"] for r in rows]
        return
    if cfg.task_family == "glue":
        assert model.config.id2label == {0: "0", 1: "1"}
        lines = (FIX / "glue" / "sst2" / "dev.tsv").read_text().splitlines()[1:]
        ours = (work / "dev_predictions.tsv").read_text().splitlines()[1:]
        for line, pred in zip(lines, ours, strict=True):
            with torch.no_grad():
                logits = model(**tok(line.split("\t")[0], return_tensors="pt")).logits
            assert model.config.id2label[int(logits.argmax())] == pred.split("\t")[-1]
        return
    rows = (work / "dev_predictions.txt").read_text().split("\n\n")
    sentences = [[line.split(" ") for line in r.splitlines()] for r in rows if r.strip()]
    for sent in sentences:
        enc = tok([w for w, _, _ in sent], is_split_into_words=True, return_tensors="pt")
        enc.pop("token_type_ids", None)
        with torch.no_grad():
            labels = model(**enc).logits[0].argmax(-1).tolist()
        first = {}
        for i, w in enumerate(enc.word_ids()):
            if w is not None and w not in first:
                first[w] = model.config.id2label[labels[i]]
        assert [first[i] for i in range(len(sent))] == [p for _, _, p in sent]


@pytest.mark.slow  # ~12 s a family on 2 busy cores, 8 of them XLA compiling the fine-tuning steps
@pytest.mark.parametrize("family", FAMILIES)
def test_family_directory_through_every_command(family, family_dir, tmp_path):
    d = family_dir(family)
    if family == "t5":
        with pytest.raises(BertJaxError, match="an encoder-decoder .T5.; features are extracted"):
            extract_features(str(d), FIX / "glue" / "sst2" / "dev.tsv", tmp_path / "x", [-1], 32, 8)
    else:
        _check_extract(family, d, tmp_path)
    if family in ("xlnet", "t5"):
        with pytest.raises(BertJaxError, match="attention maps are drawn for the BERT family"):
            attention_map(str(d), "a cat", None, -1, 0)
    else:
        _check_attention(family, d)
    _check_convert(family, d, tmp_path / "converted")
    _check_finetune(family, d, tmp_path)
