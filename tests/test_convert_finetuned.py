"""Fine-tune -> `bert-jax convert` -> transformers: the export holds the task head (with our label
names) and the tokenizer, so transformers' Auto classes and pipelines give our logits and labels.
The sentence head is checked on the real MiniLM fine-tuned on the MNLI fixture; the token, span
and multiple-choice heads on a tiny BERT written by transformers, fine-tuned on their fixtures."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from bert_jax.runs import finetune as runner
from bert_jax.runs.export import convert
from bert_jax.tokenization import FullTokenizer
from bert_jax.train.config import finetune_config

ROOT = pathlib.Path(__file__).parent.parent
FIX = ROOT / "tests" / "fixtures" / "tasks"


def _finetune(family: str, ckpt: pathlib.Path, data: pathlib.Path, workdir: pathlib.Path, **kw):
    cfg = finetune_config(family)
    cfg.update(kw)
    cfg.init_checkpoint, cfg.data_dir = str(ckpt), str(data)
    cfg.max_seq_length, cfg.train_batch_size, cfg.eval_batch_size = 64, 4, 4
    cfg.num_train_epochs, cfg.learning_rate, cfg.num_devices = 2.0, 1e-3, 1
    return runner.finetune(cfg, str(workdir))


def _convert(workdir: pathlib.Path, out: pathlib.Path) -> str:
    """`bert-jax convert` as a user runs it: relative paths, from the workdir's parent."""
    proc = subprocess.run(
        [sys.executable, "-m", "bert_jax.cli", "convert", f"--init_checkpoint={workdir.name}",
         f"--output_dir={out}"],
        capture_output=True, text=True, timeout=300, cwd=workdir.parent,
        env={k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no Orbax INFO/WARNING lines, no libtpu probing on a CPU
    return proc.stdout


def _ours(workdir: pathlib.Path, model_cls, args: tuple, enc: dict) -> np.ndarray:
    """Our fine-tuned model's outputs, from the workdir's checkpoint."""
    from bert_jax.arch.bert.pretrained import load_pretrained

    pre = load_pretrained(workdir)
    inputs = (enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    out = model_cls(pre.config, *args).apply({"params": pre.params}, *inputs)
    return np.stack(out, -1) if isinstance(out, tuple) else np.asarray(out)


@pytest.mark.slow  # ~25 s: fine-tunes the 6-layer MiniLM
def test_finetuned_minilm_exports_head_and_tokenizer(minilm_dir, tmp_path):
    import torch
    import transformers

    from bert_jax.arch.bert.heads import BertForSequenceClassification

    work, out = tmp_path / "mnli", tmp_path / "hf"
    _finetune("glue", minilm_dir, FIX / "glue" / "mnli", work, task="mnli")
    logged = [json.loads(x) for x in (work / "metrics.jsonl").read_text().splitlines()]
    assert all(0 < r["mfu"] <= 1 for r in logged if "mfu" in r)  # the peak is the best seen
    assert "BertForSequenceClassification" in _convert(work, out)

    labels = ["contradiction", "entailment", "neutral"]  # our MNLI label order
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {str(i): name for i, name in enumerate(labels)}
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    ours_tok = FullTokenizer(str(minilm_dir / "vocab.txt"), do_lower_case=True)
    a, b = "The new rights are nice enough.", "Everyone really likes the newest benefits."
    enc = tok(a, b, return_tensors="np")
    ids = ours_tok.convert_tokens_to_ids(
        ["[CLS]", *ours_tok.tokenize(a), "[SEP]", *ours_tok.tokenize(b), "[SEP]"]
    )
    assert enc["input_ids"][0].tolist() == ids and len(tok) == 30522

    model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(out), output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        theirs = model(**{k: torch.tensor(v) for k, v in enc.items()}).logits.numpy()
    ours = _ours(work, BertForSequenceClassification, (3,), enc)
    np.testing.assert_allclose(theirs, ours, atol=2e-5, rtol=1e-5)
    pipe = transformers.pipeline("text-classification", model=str(out), device="cpu")
    assert pipe({"text": a, "text_pair": b})["label"] == labels[int(ours[0].argmax())]


@pytest.mark.slow
@pytest.mark.parametrize("family", ["ner", "squad", "swag"])
def test_token_span_and_choice_heads_round_trip(family, tiny_hf_dir, tmp_path):
    import torch
    import transformers

    from bert_jax.arch.bert import heads as ours_models
    from bert_jax.tasks import ner

    data = {"ner": "conll2003", "squad": "squad", "swag": "swag"}[family]
    extra = {"version": "v1.1", "doc_stride": 16, "max_query_length": 16}
    extra = extra if family == "squad" else {}
    work, out = tmp_path / family, tmp_path / "hf"
    _finetune(family, tiny_hf_dir, FIX / data, work, **extra)
    _, _, head, _ = convert(str(work), str(out))  # what the CLI runs (tested above)
    assert head is not None and head.arch.startswith("BertFor")
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    a, b = "Who fled the bank?", "The bank robber fled before the police came."
    if family == "swag":
        enc = tok([a, a, a, a], [b, "He sat.", "It rained.", "They sang."], padding=True,
                  return_tensors="np")  # fmt: skip
        enc = {k: v[None] for k, v in enc.items()}  # 1 x 4 choices x L
        auto, ours_cls, args = transformers.AutoModelForMultipleChoice, "BertForMultipleChoice", ()
    elif family == "ner":
        enc = dict(tok(b, return_tensors="np"))
        auto, ours_cls = transformers.AutoModelForTokenClassification, "BertForTokenClassification"
        args = (len(ner.LABELS),)
        config = json.loads((out / "config.json").read_text())
        assert list(config["id2label"].values()) == list(ner.LABELS)
    else:
        enc = dict(tok(a, b, return_tensors="np"))
        auto, ours_cls = transformers.AutoModelForQuestionAnswering, "BertForQuestionAnswering"
        args = ()
    model, info = auto.from_pretrained(str(out), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        got = model(**{k: torch.tensor(v) for k, v in enc.items()})
    theirs = (np.stack([got.start_logits.numpy(), got.end_logits.numpy()], -1)
              if family == "squad" else got.logits.numpy())  # fmt: skip
    ours = _ours(work, getattr(ours_models, ours_cls), args, enc)
    np.testing.assert_allclose(theirs, ours, atol=2e-5, rtol=1e-5)
    if family == "ner":  # the pipeline tags each token with our label names, as our head does
        tags = transformers.pipeline("token-classification", model=str(out), device="cpu",
                                     ignore_labels=[])(b)  # fmt: skip
        want = [ner.LABELS[i] for i in ours[0].argmax(-1)]
        assert [t["entity"] for t in tags] == [want[t["index"]] for t in tags], tags
        assert len(tags) == enc["input_ids"].shape[1] - 2  # every token but [CLS] and [SEP]
