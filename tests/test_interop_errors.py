"""Bad checkpoints give one-line BertJaxErrors naming the file and what is wrong."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.errors import BertJaxError


@pytest.fixture
def minilm_copy(minilm_dir, tmp_path):
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        shutil.copy(minilm_dir / name, tmp_path / name)
    return tmp_path


def edit_config(path, **changes):
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(changes)
    (path / "config.json").write_text(json.dumps(cfg))


def test_missing_path(tmp_path):
    with pytest.raises(BertJaxError, match="not found as a Hugging Face dir"):
        load_pretrained(tmp_path / "nothing")


def test_pickle_only_directory_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not unpickled")
    with pytest.raises(BertJaxError, match="pytorch_model.bin .*never loads"):
        load_pretrained(tmp_path)


def test_truncated_safetensors(minilm_copy):
    data = (minilm_copy / "model.safetensors").read_bytes()
    (minilm_copy / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(BertJaxError, match="model.safetensors: not a readable safetensors"):
        load_pretrained(minilm_copy)


def test_shape_mismatch_names_variable_and_both_shapes(minilm_copy):
    edit_config(minilm_copy, intermediate_size=1024)
    with pytest.raises(BertJaxError) as e:
        load_pretrained(minilm_copy)
    assert str(e.value).endswith(
        "model.safetensors: encoder.layer.0.intermediate.dense.weight has shape (1536, 384), "
        "config says (1024, 384)"
    )


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"model_type": "gpt2"}, "model_type 'gpt2' is not a BERT-family model"),
        ({"model_type": "roberta"}, "architecture 'BertModel' is not a RoBERTa model"),
        ({"architectures": ["GPT2LMHeadModel"]}, "architecture 'GPT2LMHeadModel' is not a BERT"),
    ],
)
def test_unknown_architecture(minilm_copy, changes, message):
    edit_config(minilm_copy, **changes)
    with pytest.raises(BertJaxError, match=message):
        load_pretrained(minilm_copy)


def test_missing_tensor_is_named(minilm_copy):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(minilm_copy / "model.safetensors")
    del tensors["encoder.layer.5.output.dense.bias"]
    save_file(tensors, minilm_copy / "model.safetensors")
    with pytest.raises(BertJaxError, match="has no variable encoder.layer.5.output.dense.bias"):
        load_pretrained(minilm_copy)


def test_cli_prints_one_line(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"x")
    proc = subprocess.run(
        [sys.executable, "-m", "bert_jax.cli", "convert", f"--init_checkpoint={tmp_path}",
         f"--output_dir={tmp_path / 'out'}"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("bert-jax: error: ") and "pytorch_model.bin" in last
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()
