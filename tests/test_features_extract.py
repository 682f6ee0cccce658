"""`bert-jax extract-features` on the real MiniLM agrees with transformers (tokens from its
BertTokenizerFast, hidden states from its BertModel); the bank example and attention maps."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
import transformers

from bert_jax.features import (
    attention_probs,
    bank_similarities,
    bank_similarity_table,
    load_encoder,
    plot_attention,
)

LINES = [
    "Who was Jim Henson ? ||| Jim Henson was a puppeteer.",
    "The quick brown fox jumps over the lazy dog, then naps in the afternoon sun.",
    "Short.",
    # a pair long enough to be truncated at --max_seq_length=24, longer side first
    "The committee discussed the budget for three long hours without reaching any decision about "
    "the new library "
    "||| Everyone went home tired.",
]


@pytest.fixture(scope="module")
def hf_model(minilm_dir):
    model = transformers.BertModel.from_pretrained(minilm_dir, attn_implementation="eager")
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def encoder(minilm_dir):
    return load_encoder(minilm_dir)


def test_cli_output_matches_transformers(minilm_dir, hf_model, tmp_path):
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n")
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "bert_jax.cli", "extract-features",
         f"--input_file={tmp_path / 'in.txt'}", f"--output_file={out}",
         f"--init_checkpoint={minilm_dir}", "--layers=-1,-2,0", "--max_seq_length=24",
         "--batch_size=3"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = out.read_text().splitlines()
    # the reference's key order and json.dumps spacing
    assert lines[0].startswith(
        '{"linex_index": 0, "features": [{"token": "[CLS]", "layers": [{"index": -1, "values": ['
    )
    records = [json.loads(line) for line in lines]
    assert [r["linex_index"] for r in records] == [0, 1, 2, 3]
    model, tokenizer = hf_model
    for record, line in zip(records, LINES, strict=True):
        parts = line.split(" ||| ")
        enc = tokenizer(*parts, truncation="longest_first", max_length=24, return_tensors="pt")
        tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
        assert [f["token"] for f in record["features"]] == tokens
        with torch.no_grad():
            hidden = model(**enc, output_hidden_states=True).hidden_states
        for k, index in enumerate((-1, -2, 0)):
            theirs = hidden[1:][index][0].numpy()
            ours = np.array([f["layers"][k]["values"] for f in record["features"]])
            assert record["features"][0]["layers"][k]["index"] == index
            assert ours.shape == theirs.shape == (len(tokens), 384)
            np.testing.assert_allclose(ours, theirs, atol=1e-5)  # values rounded to 1e-6
    assert len(records[3]["features"]) == 24  # truncated to max_seq_length


def test_bank_same_meaning_closer_than_different(encoder):
    config, params, tokenizer = encoder
    sims = bank_similarities(config, params, tokenizer)
    # MiniLM: vault/robber 0.941, vault/river 0.888, robber/river 0.889
    assert sims[(0, 1)] > sims[(0, 2)] + 0.02 and sims[(0, 1)] > sims[(1, 2)] + 0.02, sims
    table = bank_similarity_table(config, params, tokenizer)
    assert "bank vault / bank robber    same" in table
    assert f"{sims[(0, 1)]:.3f}" in table


def test_attention_probs_match_transformers_and_plot(encoder, hf_model, tmp_path):
    config, params, tokenizer = encoder
    model, hf_tokenizer = hf_model
    tokens, probs_NxHxLxL = attention_probs(
        config, params, tokenizer, "The animal was tired.", "It did not cross the street."
    )
    enc = hf_tokenizer("The animal was tired.", "It did not cross the street.", return_tensors="pt")
    assert tokens == hf_tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    with torch.no_grad():
        theirs = torch.stack(model(**enc, output_attentions=True).attentions)[:, 0].numpy()
    assert probs_NxHxLxL.shape == theirs.shape == (6, 12, len(tokens), len(tokens))
    np.testing.assert_allclose(probs_NxHxLxL, theirs, atol=1e-5)

    import matplotlib.image

    png = tmp_path / "attention.png"
    plot_attention(tokens, probs_NxHxLxL[2, 3], png, "layer 2, head 3")
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and min(image.shape[:2]) > 300 and image.std() > 0.05
    assert [p.name for p in tmp_path.iterdir()] == ["attention.png"]
