"""ModernBERT as a family end to end: a Hugging Face ModernBERT directory (random weights, a
ModernBERT-style byte-level BPE tokenizer.json trained on real English text) fine-tunes with
`finetune` on GLUE (SST-2 layout), NER and SQuAD; the GLUE and NER runs convert to transformers'
task classes, whose predictions on the dev split are the ones the run wrote; our tokenizer's pair
layout is transformers'. Pretraining: the `modernbert` objective trains on the embedded corpus
through the shared loop, beats the unigram rate, and exports a ModernBertForMaskedLM that
transformers loads with our logits."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from modernbert_dirs import train_tokenizer_json, write_hf_dir

from bert_jax.runs import finetune as runner
from bert_jax.runs.export import convert_any
from bert_jax.train.config import finetune_config

FIX = pathlib.Path(__file__).parent / "fixtures" / "tasks"


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("modernbert")
    fast = train_tokenizer_json(root / "tok")
    return write_hf_dir(root / "hf", fast), fast


def test_pair_layout_is_transformers(hf_dir):
    from bert_jax.tasks.text_pairs import encode_text_pair
    from bert_jax.tokenization.directory import open_tokenizer, tokenizer_file_in

    d, fast = hf_dir
    tok = open_tokenizer(tokenizer_file_in(d), None, "do_lower_case")
    a, b = "The cat sat on the mat in 1999.", "Who wrote it? Nobody knows, really."
    ids, mask, segments = encode_text_pair(tok, a, b, 40)
    ref = fast(a, b, padding="max_length", max_length=40)
    assert ids.tolist() == ref["input_ids"] and mask.tolist() == ref["attention_mask"]
    assert not segments.any()  # no token types


def _config(task_family: str, d: pathlib.Path):
    cfg = finetune_config(task_family)
    if task_family == "glue":
        cfg.task, cfg.data_dir = "sst2", str(FIX / "glue" / "sst2")
    else:
        cfg.data_dir = str(FIX / ("conll2003" if task_family == "ner" else "squad"))
    cfg.init_checkpoint, cfg.max_seq_length, cfg.num_devices = str(d), 32, 1
    cfg.num_train_epochs, cfg.train_batch_size, cfg.eval_batch_size = 1.0, 2, 4
    cfg.learning_rate = 1e-3
    return cfg


@pytest.mark.slow  # three fine-tuning runs, each compiling its steps (~10 s each)
@pytest.mark.parametrize("task_family", ["glue", "ner", "squad"])
def test_finetunes_and_converts_to_transformers(hf_dir, task_family, tmp_path):
    import torch
    import transformers

    d, fast = hf_dir
    cfg = _config(task_family, d)
    if task_family == "squad":
        cfg.doc_stride, cfg.max_query_length = 16, 8
    work = tmp_path / "work"
    results = runner.finetune(cfg, str(work))
    assert results["train_steps"] >= 1 and all(np.isfinite(v) for v in results.values())
    assert "modernbert" in json.loads((work / "config.json").read_text())
    if task_family == "squad":
        return
    out = tmp_path / "hf"
    convert_any(str(work), str(out))
    arch = json.loads((out / "config.json").read_text())["architectures"][0]
    model = getattr(transformers, arch).from_pretrained(out, attn_implementation="eager").eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    if task_family == "glue":
        lines = (FIX / "glue" / "sst2" / "dev.tsv").read_text().splitlines()[1:]
        ours = (work / "dev_predictions.tsv").read_text().splitlines()[1:]
        for line, pred in zip(lines, ours, strict=True):
            enc = tok(line.split("\t")[0], return_tensors="pt", truncation=True, max_length=32)
            with torch.no_grad():
                logits = model(**enc).logits
            assert model.config.id2label[int(logits.argmax())] == pred.split("\t")[-1]
        return
    # Words are tokenized one by one with a leading space (the layout's word_prefix, as
    # RoBERTa's add_prefix_space), each tagged at its first piece.
    rows = (work / "dev_predictions.txt").read_text().split("\n\n")
    for row in [r for r in rows if r.strip()][:8]:
        sent = [line.split(" ") for line in row.splitlines()]
        pieces = [tok(" " + w, add_special_tokens=False)["input_ids"] for w, _, _ in sent]
        ids = [tok.cls_token_id, *[i for p in pieces for i in p], tok.sep_token_id]
        if len(ids) > 32:
            continue  # truncated in the run
        with torch.no_grad():
            labels = model(input_ids=torch.tensor([ids])).logits[0].argmax(-1).tolist()
        starts = np.cumsum([1] + [len(p) for p in pieces[:-1]])
        assert [model.config.id2label[labels[i]] for i in starts] == [p for _, _, p in sent]


@pytest.mark.slow  # one pretraining run of 150 steps (~20 s)
def test_pretrains_on_real_text_and_exports(tmp_path):
    """On packed rows (several documents per row, attention kept inside each), as ModernBERT's
    unpadded training."""
    import torch
    import transformers
    from flax.core import meta

    from bert_jax.arch.modernbert import ModernBertForMaskedLM
    from bert_jax.configs import modernbert
    from bert_jax.corpus import snapshot
    from bert_jax.data.pipeline import create_pretraining_data
    from bert_jax.runs.pretrain import run_pretraining
    from bert_jax.tokenization.vocab_builder import build_vocab

    snapshot.write_corpus(tmp_path / "corpus.txt", max_bytes=300_000)
    docs = (tmp_path / "corpus.txt").read_text().strip().split("\n\n")
    (tmp_path / "train.txt").write_text("\n\n".join(docs[:-8]) + "\n")
    (tmp_path / "eval.txt").write_text("\n\n".join(docs[-8:]) + "\n")
    build_vocab(str(tmp_path / "train.txt"), 1000, tmp_path, num_threads=1)
    vocab = str(tmp_path / "vocab.txt")
    for split in ("train", "eval"):
        create_pretraining_data(str(tmp_path / f"{split}.txt"), str(tmp_path / split), vocab,
                                max_seq_length=64, max_predictions_per_seq=20,
                                objective="modernbert", dynamic_masking=True,
                                pack_sequences=4)  # fmt: skip
    c = modernbert.get_config("cpu")
    c.update(dict(
        train_files=str(tmp_path / "train" / "*.tfrecord"), vocab_file=vocab, train_steps=150,
        eval_files=str(tmp_path / "eval" / "*.tfrecord"), eval_every_steps=150,
        checkpoint_every_steps=150, max_eval_steps=5, export_hf_dir=str(tmp_path / "hf"),
        batch_warmup_start=0, batch_warmup_steps=0,  # the whole batch in so short a run
    ))  # fmt: skip
    result = run_pretraining(c, str(tmp_path / "workdir"))  # on packed rows: the shards' 4
    assert result.trainer.task.pack_sequences == 4
    unigram = _unigram_rate(c, tmp_path)
    accuracy = result.last_eval["eval_masked_lm_accuracy"]
    print(f"held-out masked-LM accuracy {accuracy:.4f}, unigram {unigram:.4f}")
    # Measured (seed 0, packed rows): 0.089 against unigram 0.043. 150 steps learn word
    # frequencies and some context, not yet past the context-free bar (the cpu preset's 3000
    # steps reach 0.313 against its bar 0.131: configs/modernbert.py).
    assert accuracy > 2 * unigram
    hf = transformers.ModernBertForMaskedLM.from_pretrained(
        tmp_path / "hf", attn_implementation="eager"
    ).eval()
    task_config = result.trainer.task.model.config
    params = meta.unbox(result.state.params)["mlm"]
    ids = np.random.RandomState(0).randint(5, 1000, size=(2, 64))
    ours = ModernBertForMaskedLM(task_config).apply({"params": params}, ids)
    with torch.no_grad():
        theirs = hf(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(np.asarray(ours), theirs, atol=1e-4)


def _unigram_rate(c, root) -> float:
    """Held-out accuracy of always predicting the most frequent training target, on the masks
    the run's evaluation drew (same shards, seed and rule)."""
    import itertools

    from bert_jax.input import EvalInput
    from bert_jax.objectives import get
    from bert_jax.objectives.baselines import masked_lm_baselines
    from bert_jax.objectives.masking import MaskingSpec

    spec = MaskingSpec.from_vocab_file(
        c.vocab_file, c.masked_lm_prob, rule=get(c.objective).masking
    )

    def batches(split: str, n: int):
        data = EvalInput(str(root / split / "*.tfrecord"), c.global_batch_size, 64, 20,
                         dynamic_masking=spec, seed=c.seed, objective=c.objective,
                         pack_sequences=4)  # fmt: skip
        return itertools.islice(iter(data), n)

    mask_id = (root / "vocab.txt").read_text().split("\n").index("[MASK]")
    return masked_lm_baselines(batches("train", 50), batches("eval", 5), mask_id)["unigram"]
