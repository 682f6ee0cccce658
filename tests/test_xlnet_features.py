"""`extract-features` and `convert` on a Hugging Face XLNet directory with a real sentencepiece
model (trained here on the embedded corpus): tokens and ids as transformers' XLNetTokenizer lays
them out, content-stream values as transformers' XLNetModel computes them."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from bert_jax.arch.xlnet.checkpoints import convert_xlnet, read_xlnet_dir
from bert_jax.arch.xlnet.features import extract_xlnet_to_file

LINES = ["The module defines functions for working with files.",
         "Return the value of the key. ||| If the key is missing, raise an error."]  # fmt: skip


def test_extract_features_matches_transformers(xlnet_dir, tmp_path):
    import sentencepiece as spm
    import transformers

    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "bert_jax.cli", "extract-features",
         f"--input_file={tmp_path / 'in.txt'}", f"--output_file={tmp_path / 'out.jsonl'}",
         f"--init_checkpoint={xlnet_dir}", "--layers=-1,-3", "--max_seq_length=32"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "wrote features of 2 examples" in proc.stdout
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    # From the pieces and scores (transformers' own .model reader needs another protobuf).
    proc = spm.SentencePieceProcessor(model_file=str(xlnet_dir / "spiece.model"))
    pieces = [(proc.IdToPiece(i), proc.GetScore(i)) for i in range(proc.GetPieceSize())]
    tok = transformers.XLNetTokenizer(vocab=pieces)
    model = transformers.XLNetModel.from_pretrained(xlnet_dir).eval()
    for row, line in zip(rows, LINES, strict=True):
        parts = line.split(" ||| ")
        enc = tok(*parts, return_tensors="pt", return_token_type_ids=True)
        assert enc["token_type_ids"][0, -1] == 2
        assert [t["token"] for t in row["features"]] == tok.convert_ids_to_tokens(
            enc["input_ids"][0]
        )
        with torch.no_grad():
            hidden = model(**enc, output_hidden_states=True).hidden_states
        for k, index in enumerate((-1, -3)):
            ours = np.array([t["layers"][k]["values"] for t in row["features"]])
            np.testing.assert_allclose(ours, hidden[index][0].numpy(), atol=2e-5)


def test_bad_layers_are_one_line_errors(xlnet_dir, tmp_path):
    from bert_jax.errors import BertJaxError

    (tmp_path / "in.txt").write_text(LINES[0] + "\n")
    with pytest.raises(BertJaxError, match="out of range for a 3-layer model"):
        extract_xlnet_to_file(xlnet_dir, tmp_path / "in.txt", tmp_path / "o.jsonl", (-4,))


def test_convert_writes_a_directory_transformers_loads(xlnet_dir, tmp_path):
    import transformers

    print(convert_xlnet(xlnet_dir, tmp_path / "out"))
    assert (tmp_path / "out" / "spiece.model").read_bytes() == (
        xlnet_dir / "spiece.model"
    ).read_bytes()
    a = transformers.XLNetLMHeadModel.from_pretrained(xlnet_dir).eval()
    b = transformers.XLNetLMHeadModel.from_pretrained(tmp_path / "out").eval()
    ids = torch.tensor([[5, 17, 33, 4, 3]])
    with torch.no_grad():
        np.testing.assert_allclose(a(ids).logits.numpy(), b(ids).logits.numpy(), atol=1e-6)
    _, params, has_head = read_xlnet_dir(tmp_path / "out")
    assert has_head and params["lm_loss_bias"].shape == (600,)
