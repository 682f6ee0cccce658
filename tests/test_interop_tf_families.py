"""Google's ALBERT and ELECTRA TF checkpoints load with their own variable names and give the
numbers of the original code. The fixtures (tests/fixtures/tf_families/README.md) were made by
google-research/albert's and google-research/electra's modeling.py under tf.compat.v1: tiny
models with every weight random, saved with tf.train.Saver, and their outputs on fixed inputs
(sequence and pooled outputs; ALBERT's MLM and SOP heads and ELECTRA's replaced-token head as
their run_pretraining.py builds them)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from bert_jax.arch.bert.heads import BertForPreTraining, BertForReplacedTokenDetection
from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.errors import BertJaxError
from bert_jax.model.scan import stack_layers

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "tf_families"
ATOL = 1e-5


def _expected(name: str) -> dict[str, np.ndarray]:
    return dict(np.load(FIXTURES / name / "expected.npz"))


@pytest.mark.parametrize("scan_layers", [False, True])
def test_albert_release_matches_the_original_code(scan_layers):
    pre = load_pretrained(FIXTURES / "albert")  # found through its `checkpoint` state file
    assert pre.config.family == "albert" and pre.config.share_layers == "all"
    assert pre.config.hidden_act == "gelu_new"  # ALBERT's gelu is the tanh form
    assert set(pre.heads) == {"pooler", "mlm", "nsp"} and not pre.ignored
    x = _expected("albert")
    config = pre.config.replace(scan_layers=scan_layers)
    params = stack_layers(pre.params) if scan_layers else pre.params
    out = BertForPreTraining(config, use_nsp=True).apply(
        {"params": params}, x["input_ids"], x["input_mask"], x["token_type_ids"], x["positions"]
    )
    np.testing.assert_allclose(out.encoder.sequence_output, x["sequence_output"], atol=ATOL)
    np.testing.assert_allclose(out.encoder.pooled_output, x["pooled_output"], atol=ATOL)
    mlm = np.asarray(out.mlm_logits).reshape(-1, x["mlm_logits"].shape[-1])
    np.testing.assert_allclose(mlm, x["mlm_logits"], atol=ATOL)
    np.testing.assert_allclose(out.nsp_logits, x["sop_logits"], atol=ATOL)


def test_electra_release_matches_the_original_code():
    pre = load_pretrained(FIXTURES / "electra" / "model.ckpt")  # a prefix, as well as a dir
    assert pre.config.family == "electra" and pre.config.embedding_size == 8
    assert not pre.config.pooler and pre.heads == ("rtd",)
    x = _expected("electra")
    rtd, out = BertForReplacedTokenDetection(pre.config).apply(
        {"params": pre.params}, x["input_ids"], x["input_mask"], x["token_type_ids"]
    )
    np.testing.assert_allclose(out.sequence_output, x["sequence_output"], atol=ATOL)
    np.testing.assert_allclose(rtd, x["rtd_logits"], atol=ATOL)


def test_electra_without_a_config_file_says_which_to_give(tmp_path):
    for f in (FIXTURES / "electra").glob("model.ckpt.*"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    missing = r"bert_config.json: no such config file \(a TF checkpoint of electra"
    with pytest.raises(BertJaxError, match=missing):
        load_pretrained(tmp_path)


@pytest.mark.parametrize("name", ["albert", "electra"])
def test_tf_release_exported_to_transformers_gives_the_original_numbers(name, tmp_path):
    """Original TF code -> ours -> a Hugging Face directory: transformers' own classes reproduce
    the original code's outputs, so the three agree."""
    import torch
    import transformers

    from bert_jax.arch.bert.hf import export_hf

    pre = load_pretrained(FIXTURES / name)
    export_hf(pre.config, pre.params, tmp_path)
    x = _expected(name)
    model = transformers.AutoModelForPreTraining.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(x["input_ids"]).long(),
            attention_mask=torch.tensor(x["input_mask"]).long(),
            token_type_ids=torch.tensor(x["token_type_ids"]).long(),
            output_hidden_states=True,
        )
    np.testing.assert_allclose(out.hidden_states[-1].numpy(), x["sequence_output"], atol=ATOL)
    if name == "electra":
        np.testing.assert_allclose(out.logits.numpy(), x["rtd_logits"], atol=ATOL)
    else:
        np.testing.assert_allclose(out.sop_logits.numpy(), x["sop_logits"], atol=ATOL)
