"""Text-to-text fine-tuning (T5) through `finetune`: GLUE as "sst2 sentence: ... -> positive"
and SQuAD as "question: ... context: ... -> answer", scored by greedy decoding and the official
metrics. The decoded dev outputs are checked against transformers' `generate` on the fine-tuned
weights exported as a Hugging Face T5 directory, inputs tokenised by transformers' T5Tokenizer."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from bert_jax.arch.seq2seq import text_to_text
from bert_jax.corpus import embedded
from bert_jax.errors import BertJaxError
from bert_jax.runs import finetune as runner
from bert_jax.tasks import glue
from bert_jax.train.config import finetune_config

FIX = pathlib.Path(__file__).parent / "fixtures" / "tasks"


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory) -> pathlib.Path:
    """A tiny random T5 v1.1 written by transformers, with a T5 sentencepiece model trained here
    on the embedded corpus."""
    import torch
    import transformers

    from bert_jax.tokenization.t5_vocab import T5Vocab, train_t5_spm

    d = tmp_path_factory.mktemp("t5")
    sentences = [s for doc in embedded.iter_documents(max_documents=300) for s in doc]
    vocab = T5Vocab(train_t5_spm(sentences, d, 400))
    torch.manual_seed(0)
    cfg = transformers.T5Config(
        vocab_size=vocab.pieces + 100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False, dropout_rate=0.0,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    transformers.T5ForConditionalGeneration(cfg).save_pretrained(d)
    return d


def _sst2(data: pathlib.Path) -> None:
    """SST-2's layout from real sentences: label 1 when the sentence is a question or a
    statement ending in '.', 0 otherwise (learnable from the last piece)."""
    sentences = [s for doc in embedded.iter_documents(max_documents=300) for s in doc]
    rows = [(s.replace("\t", " "), int(s.rstrip().endswith("."))) for s in sentences[:96]]
    data.mkdir()
    for name, part in (("train", rows[:64]), ("dev", rows[64:])):
        lines = "".join(f"{s}\t{y}\n" for s, y in part)
        (data / f"{name}.tsv").write_text("sentence\tlabel\n" + lines, encoding="utf-8")


def _config(family: str, t5_dir: pathlib.Path, data_dir: pathlib.Path, **kw):
    cfg = finetune_config(family)
    cfg.init_checkpoint, cfg.data_dir = str(t5_dir), str(data_dir)
    cfg.max_seq_length, cfg.train_batch_size, cfg.eval_batch_size = 48, 16, 16
    cfg.learning_rate, cfg.num_devices, cfg.log_every_steps = 3e-3, 1, 20
    cfg.update(kw)
    return cfg


def test_strings_are_t5s():
    spec = glue.get_spec("mrpc")
    ex = glue.Example("dev-0", "A cat sat.", "The cat sat.", "1")
    assert text_to_text.glue_text(spec, ex) == "mrpc sentence1: A cat sat. sentence2: The cat sat."
    assert text_to_text.glue_target(spec, "1") == "equivalent"
    assert text_to_text.glue_prediction(spec, "not_equivalent") == 0.0
    assert text_to_text.glue_prediction(spec, "maybe") == -1.0
    stsb = glue.get_spec("stsb")
    assert text_to_text.glue_target(stsb, 3.75) == "3.8"
    assert text_to_text.glue_prediction(stsb, "x") == -1.0


@pytest.mark.slow  # two fine-tuning runs and transformers' generate (~40 s)
def test_glue_and_squad_text_to_text_end_to_end(t5_dir, tmp_path):
    import sentencepiece as spm
    import torch
    import transformers

    from bert_jax.arch.seq2seq.load import load_seq2seq
    from bert_jax.arch.seq2seq.t5_checkpoints import export_t5

    _sst2(tmp_path / "sst2")
    cfg = _config("glue", t5_dir, tmp_path / "sst2", task="sst2", num_train_epochs=30.0,
                  max_target_length=4)  # fmt: skip
    results = runner.finetune(cfg, tmp_path / "glue")
    rows = [json.loads(x) for x in (tmp_path / "glue" / "dev_predictions.jsonl").open()]
    assert len(rows) == 32 and rows[0]["input"].startswith("sst2 sentence: ")
    assert {r["target"] for r in rows} <= {"negative", "positive"}
    # 120 steps teach the output format: every dev output is a label word.
    assert results["valid_outputs"] == 1.0, rows[:4]
    assert 0.0 <= results["accuracy"] <= 1.0
    labels = [r["target"] == "positive" for r in rows]
    outputs = [r["output"] == "positive" for r in rows]
    assert results["accuracy"] == pytest.approx(np.mean(np.equal(labels, outputs)))

    # The same outputs from transformers on the fine-tuned weights and its own tokenizer.
    tuned = load_seq2seq(tmp_path / "glue")
    export_t5(tuned.config, tuned.params, tmp_path / "hf")
    model = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path / "hf").eval()
    proc = spm.SentencePieceProcessor(model_file=str(t5_dir / "spiece.model"))
    pieces = [(proc.IdToPiece(i), proc.GetScore(i)) for i in range(proc.GetPieceSize())]
    tok = transformers.T5Tokenizer(vocab=pieces, extra_ids=100)
    enc = tok([r["input"] for r in rows[:8]], padding=True, truncation=True, max_length=48,
              return_tensors="pt")  # fmt: skip
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=4, do_sample=False, num_beams=1)
    theirs = tok.batch_decode(out, skip_special_tokens=True)
    assert [t.strip() for t in theirs] == [r["output"] for r in rows[:8]]

    squad = _config("squad", t5_dir, FIX / "squad", version="v2.0", train_file="train-v2.0.json",
                    predict_file="dev-v2.0.json", max_seq_length=128, max_target_length=8,
                    num_train_epochs=2.0, train_batch_size=4, eval_batch_size=4)  # fmt: skip
    results = runner.finetune(squad, tmp_path / "squad")
    assert 0.0 <= results["f1"] <= 100.0 and "HasAns_f1" in results and "NoAns_f1" in results
    preds = json.loads((tmp_path / "squad" / "predictions.json").read_text())
    dev = json.loads((FIX / "squad" / "dev-v2.0.json").read_text())
    assert set(preds) == {q["id"] for a in dev["data"] for p in a["paragraphs"] for q in p["qas"]}


def test_text_to_text_refuses_what_it_does_not_build(t5_dir, tmp_path):
    cfg = _config("ner", t5_dir, FIX / "conll2003")
    with pytest.raises(BertJaxError, match="text-to-text fine-tuning is built for glue and squad"):
        runner.finetune(cfg, tmp_path / "ner")
    cfg = _config("glue", t5_dir, FIX / "glue" / "sst2", task="sst2", num_seeds=3)
    with pytest.raises(BertJaxError, match="num_seeds > 1 are not built"):
        runner.finetune(cfg, tmp_path / "seeds")
    # Before: pack_examples was ignored (the run's outputs byte-identical to an unpacked run's).
    cfg = _config("glue", t5_dir, FIX / "glue" / "sst2", task="sst2", pack_examples=True)
    with pytest.raises(BertJaxError, match=r"^config pack_examples: not built for text-to-text"):
        runner.finetune(cfg, tmp_path / "packed")
    assert not (tmp_path / "packed").exists()
