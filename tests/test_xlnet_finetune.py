"""XLNet through the existing fine-tuning tasks: the rows reach the model as transformers'
XLNetTokenizer lays them out (<cls> last, left padding, token types 0/1/2/3), the heads on the
grafted encoder give transformers' logits, and `finetune` runs GLUE, SQuAD v2.0 and CoNLL NER
end to end with their own metrics and prediction files."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from bert_jax.arch.xlnet import finetune as xlnet_finetune
from bert_jax.arch.xlnet import layout as xlnet_layout
from bert_jax.corpus import embedded
from bert_jax.errors import BertJaxError
from bert_jax.runs import finetune as runner
from bert_jax.tasks.fresh_params import fresh_params
from bert_jax.tasks.jobs import make_job
from bert_jax.tokenization.layout import XLNET_PAD_SEGMENT
from bert_jax.tokenization.sentencepiece_tokenizer import XLNetTokenizer
from bert_jax.train.config import finetune_config

FIX = pathlib.Path(__file__).parent / "fixtures" / "tasks"
MAX_LEN = 48
PAIR_LEN = 64  # some pairs of the corpus fit, some are truncated


def _config(family: str, xlnet_dir: pathlib.Path, data_dir: pathlib.Path, **kw):
    cfg = finetune_config(family)
    cfg.init_checkpoint, cfg.data_dir, cfg.do_lower_case = str(xlnet_dir), str(data_dir), None
    cfg.max_seq_length, cfg.train_batch_size, cfg.eval_batch_size = MAX_LEN, 8, 8
    cfg.num_train_epochs, cfg.learning_rate, cfg.num_devices = 1.0, 1e-3, 1
    for key, value in kw.items():
        cfg[key] = value
    return cfg


def _hf_tokenizer(xlnet_dir: pathlib.Path):
    import sentencepiece as spm
    import transformers

    proc = spm.SentencePieceProcessor(model_file=str(xlnet_dir / "spiece.model"))
    pieces = [(proc.IdToPiece(i), proc.GetScore(i)) for i in range(proc.GetPieceSize())]
    return transformers.XLNetTokenizer(vocab=pieces)


def _write_mrpc(data: pathlib.Path) -> dict[str, list[tuple[str, str]]]:
    """MRPC's layout from the embedded corpus: label 1 = the next sentence of the document, 0 =
    a sentence of another document."""
    docs = [d for d in embedded.iter_documents(max_documents=200) if len(d) >= 2][:56]
    rows = []
    for i, doc in enumerate(docs):
        other = docs[(i + 7) % len(docs)]
        rows.append(("1", doc[0], doc[1]) if i % 2 else ("0", doc[0], other[-1]))
    data.mkdir()
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    pairs = {}
    for name, part in (("train", rows[:40]), ("dev", rows[40:])):
        lines = [f"{y}\t{k}\t{k}\t{a}\t{b}\n" for k, (y, a, b) in enumerate(part)]
        (data / f"{name}.tsv").write_text(header + "".join(lines), encoding="utf-8")
        pairs[name] = [(a, b) for _, a, b in part]
    return pairs


@pytest.fixture(scope="module")
def mrpc(xlnet_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("xlnet_glue") / "mrpc"
    pairs = _write_mrpc(data)
    cfg = _config("glue", xlnet_dir, data, task="mrpc", max_seq_length=PAIR_LEN)
    tokenizer, pre, lower = runner._tokenizer_and_weights(cfg)
    job = xlnet_finetune.XLNetLayoutJob(make_job(cfg, do_lower_case=lower))
    job.load(tokenizer)
    return cfg, tokenizer, pre, job, pairs


def test_rows_are_laid_out_as_xlnet_tokenizer_does(mrpc, xlnet_dir):
    cfg, tokenizer, pre, job, pairs = mrpc
    assert isinstance(tokenizer, XLNetTokenizer) and not tokenizer.do_lower_case
    hf_tok = _hf_tokenizer(xlnet_dir)
    a, b = zip(*pairs["train"], strict=True)
    # Pairs that fit: truncation is XLNet's run_classifier rule (one token at a time from the
    # longer text, as BERT's), which transformers' fast tokenizers split differently on ties.
    lengths = [len(ids) for ids in hf_tok(list(a), list(b))["input_ids"]]
    fits = [i for i, n in enumerate(lengths) if n <= PAIR_LEN]
    assert 4 <= len(fits) < len(a)
    enc = hf_tok([a[i] for i in fits], [b[i] for i in fits], padding="max_length",
                 max_length=PAIR_LEN, return_token_type_ids=True)  # fmt: skip
    np.testing.assert_array_equal(job.train["input_ids"][fits], enc["input_ids"])
    np.testing.assert_array_equal(job.train["input_mask"][fits], enc["attention_mask"])
    # Token types of real tokens; padding is 3 (XLNetTokenizer.pad_token_type_id), though its
    # padding call writes 0 there: masked keys, so the value never reaches a real token.
    real = np.asarray(enc["attention_mask"]) == 1
    theirs = np.where(real, enc["token_type_ids"], XLNET_PAD_SEGMENT)
    np.testing.assert_array_equal(job.train["segment_ids"][fits], theirs)
    assert (job.train["input_mask"][fits, 0] == 0).any()  # padded, on the left


def test_positions_map_forward_and_back():
    rng = np.random.default_rng(0)
    n, length = 5, 12
    real = rng.integers(3, length + 1, n)
    mask = (np.arange(length)[None] < real[:, None]).astype(np.int32)
    arrays = {"input_ids": rng.integers(5, 99, (n, length)) * mask, "input_mask": mask,
              "segment_ids": np.zeros((n, length), np.int32),
              "labels": rng.integers(0, 9, (n, length)), "start_positions": real - 1}  # fmt: skip
    moved, pos = xlnet_layout.relayout(arrays)
    rows = np.arange(n)
    # The last real token (the answer here) and <cls> (first before) land where XLNet has them.
    assert (moved["start_positions"] == length - 2).all()
    assert (moved["input_ids"][:, -1] == arrays["input_ids"][:, 0]).all()
    assert (moved["input_ids"][rows, moved["start_positions"]] == arrays["input_ids"][rows, real - 1]).all()  # noqa: E501
    np.testing.assert_array_equal(
        xlnet_layout.back_to_featurizer_layout(moved["labels"], pos), arrays["labels"]
    )
    logits = rng.normal(size=(n, length, 3))
    start_back, _ = xlnet_layout.back_to_featurizer_layout((logits, logits), pos)
    np.testing.assert_array_equal(start_back[rows, 0], logits[:, -1])  # <cls>: the null answer


def test_classification_head_on_grafted_encoder_matches_transformers(mrpc, xlnet_dir):
    import torch
    import transformers

    from bert_jax.arch.bert.pretrained import graft_encoder

    cfg, _, pre, job, pairs = mrpc
    task = job.train_task(pre.config, 8)
    params = graft_encoder(fresh_params(task, 0, pre.config.initializer_range),
                           pre.params)  # fmt: skip
    split = job.evals[0]
    ours = np.asarray(task.predict(params, {k: split.arrays[k] for k in
                                            ("input_ids", "input_mask", "segment_ids")}))
    model = transformers.XLNetForSequenceClassification.from_pretrained(
        xlnet_dir, num_labels=2
    ).eval()
    with torch.no_grad():  # the new head's weights from ours (torch Linear: [out, in])
        for name, module in (("summary", model.sequence_summary.summary),
                             ("logits_proj", model.logits_proj)):  # fmt: skip
            module.weight.copy_(torch.tensor(np.asarray(params[name]["kernel"]).T))
            module.bias.copy_(torch.tensor(np.asarray(params[name]["bias"])))
    a, b = zip(*pairs["dev"], strict=True)
    enc = _hf_tokenizer(xlnet_dir)(list(a), list(b), padding="max_length", truncation=True,
                                   max_length=PAIR_LEN, return_tensors="pt")  # fmt: skip
    with torch.no_grad():
        theirs = model(**enc).logits.numpy()
    np.testing.assert_allclose(ours, theirs, atol=2e-5, rtol=1e-5)


@pytest.mark.slow  # three fine-tuning runs, each compiling its model (~30 s)
def test_finetune_glue_squad_and_ner_end_to_end(mrpc, xlnet_dir, tmp_path):
    glue = runner.finetune(mrpc[0], tmp_path / "mrpc")
    assert 0.0 <= glue["accuracy"] <= 1.0 and 0.0 <= glue["f1"] <= 1.0
    saved = json.loads((tmp_path / "mrpc" / "config.json").read_text())
    assert saved["xlnet"]["d_model"] == 32 and "bert" not in saved
    assert len((tmp_path / "mrpc" / "dev_predictions.tsv").read_text().splitlines()) > 1

    squad = _config("squad", xlnet_dir, FIX / "squad", version="v2.0",
                    train_file="train-v2.0.json", predict_file="dev-v2.0.json",
                    max_query_length=16, doc_stride=16)  # fmt: skip
    results = runner.finetune(squad, tmp_path / "squad")
    assert 0.0 <= results["f1"] <= 100.0 and "HasAns_f1" in results
    preds = json.loads((tmp_path / "squad" / "predictions.json").read_text())
    dev = json.loads((FIX / "squad" / "dev-v2.0.json").read_text())
    ids = {q["id"] for a in dev["data"] for p in a["paragraphs"] for q in p["qas"]}
    assert set(preds) == ids
    contexts = " ".join(p["context"] for a in dev["data"] for p in a["paragraphs"])
    assert all(text in contexts for text in preds.values())  # answers are text of the contexts

    ner = _config("ner", xlnet_dir, FIX / "conll2003", train_file="train.txt",
                  dev_file="valid.txt")  # fmt: skip
    results = runner.finetune(ner, tmp_path / "ner")
    assert 0.0 <= results["f1"] <= 100.0
    assert (tmp_path / "ner" / "dev_predictions.txt").exists()


def test_bert_only_settings_are_refused_for_xlnet(xlnet_dir):
    cfg = _config("glue", xlnet_dir, FIX / "glue" / "mrpc", task="mrpc", bilstm_size=8)
    with pytest.raises(BertJaxError, match="bilstm_size: not built for XLNet"):
        runner._tokenizer_and_weights(cfg)
    cfg = _config("swag", xlnet_dir, FIX / "swag")
    with pytest.raises(BertJaxError, match=r"multiple choice \(SWAG\): not built for XLNet"):
        xlnet_finetune.XLNetLayoutJob(make_job(cfg))


def test_squad_answer_inside_a_word_is_spelled_from_the_pieces(mrpc):
    """A span ending inside a whitespace word ("1998," without its comma) is spelled from the
    sentencepiece pieces and mapped onto those characters; without `pieces_to_text` only whole
    words can come back (the WordPiece path's fallback)."""
    from bert_jax.tasks import squad, squad_predict

    tokenizer = mrpc[1]
    words = ["The", "chain", "was", "sold", "in", "1998,", "then"]
    ex = squad.SquadExample("q0", "When was it sold?", words)
    arrays, feats = squad.featurize([ex], tokenizer, max_seq_length=MAX_LEN, doc_stride=16,
                                    max_query_length=16)  # fmt: skip
    feat = feats[0]
    word = ex.doc_tokens.index("1998,")
    span = [p for p, w in feat.token_to_orig_map.items() if w == word]
    assert feat.tokens[span[-1]] == ","  # the comma is a piece of its own here
    start = np.full((1, MAX_LEN), -10.0)
    end = np.full((1, MAX_LEN), -10.0)
    start[0, span[0]], end[0, span[-2]] = 10.0, 10.0
    kw = dict(version_2=False, do_lower_case=False)
    spelled, _, _ = squad_predict.predict([ex], feats, start, end, **kw,
                                          pieces_to_text=tokenizer.pieces_to_text)  # fmt: skip
    assert spelled["q0"] == "1998"
    whole, _, _ = squad_predict.predict([ex], feats, start, end, **kw)
    assert whole["q0"] == "1998,"
