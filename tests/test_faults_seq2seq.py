"""Faults of the seq2seq surfaces (issue 32): the span-corruption / prefix-LM data step, `bert-jax
generate`, the T5 config and sentencepiece vocabulary, and the checkpoint message every family's
training run prints when a save fails. Each case is refused with one line before any work, and
never replaces or truncates a finished output."""

from __future__ import annotations

import errno

import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.checkpoint import Checkpointer, InputStateHandler
from bert_jax.errors import BertJaxError


# ---- a failed checkpoint save names itself and the steps that are intact ----------------------
@pytest.mark.parametrize("async_save", [False, True], ids=["sync", "async"])
def test_failed_save_names_its_own_step_and_the_intact_ones(tmp_path, monkeypatch, async_save):
    """A T5 run (synchronous saves) on a full disk said "saving checkpoint step 2 failed; intact
    checkpoints: none" when step 2 was intact and the save of step 4 failed."""
    state = {"params": {"w": jnp.arange(8.0)}, "step": jnp.int32(0)}
    ckpt = Checkpointer(tmp_path / "checkpoints", async_save=async_save, keep=5)
    ckpt.save(2, state, {"position": 2})
    ckpt.wait()
    write = InputStateHandler.save

    def full_disk(self, directory, args):
        if args.state["position"] == 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, directory, args)

    monkeypatch.setattr(InputStateHandler, "save", full_disk)
    with pytest.raises(BertJaxError) as e:
        ckpt.save(4, state, {"position": 4})
        ckpt.wait()
    ckpt.close()
    message = str(e.value)
    assert "saving checkpoint step 4 failed (OSError: No space left on device)" in message, message
    assert message.endswith("intact checkpoints: [2]"), message
    monkeypatch.undo()
    again = Checkpointer(tmp_path / "checkpoints")  # the rerun resumes from the intact step
    assert again.latest_step() == 2
    again.close()


# ---- fixtures: a small corpus, its T5 sentencepiece model, a tiny T5 directory ----------------
@pytest.fixture(scope="module")
def t5(tmp_path_factory) -> dict:
    """Text from the embedded corpus, a 300-piece T5 sentencepiece model and a random-weight
    T5 (1+1 layers, d_model 16) written as a Hugging Face directory, without torch."""
    import jax

    from bert_jax.arch.seq2seq import EncoderDecoder, seq2seq_preset
    from bert_jax.arch.seq2seq.t5_checkpoints import export_t5
    from bert_jax.corpus import embedded
    from bert_jax.tokenization.t5_vocab import T5Vocab, train_t5_spm

    root = tmp_path_factory.mktemp("t5_faults")
    sentences = [s for doc in embedded.iter_documents(max_documents=120) for s in doc]
    (root / "train.txt").write_text("\n".join(sentences) + "\n")
    vocab = T5Vocab(train_t5_spm(sentences, root / "vocab", 300))
    cfg = seq2seq_preset("t5-v1_1-small", vocab_size=vocab.size, d_model=16, d_kv=8, d_ff=32,
                         num_layers=1, num_decoder_layers=1, num_heads=2)  # fmt: skip
    ids = jnp.ones((1, 4), jnp.int32)  # random weights of init's shapes (init itself: 10 s)
    shapes = jax.eval_shape(EncoderDecoder(cfg).init, jax.random.PRNGKey(0), ids, ids, ids)
    rs = np.random.RandomState(0)
    params = jax.tree.map(lambda x: rs.randn(*x.shape).astype(np.float32) * 0.3, shapes["params"])
    export_t5(cfg, params, root / "model", vocab.model_file)
    return {"root": root, "text": root / "train.txt", "spm": vocab.model_file,
            "model": root / "model"}  # fmt: skip


# ---- the span-corruption / prefix-LM data step --------------------------------------------------
@pytest.mark.parametrize("objective", ["span_corruption", "prefix_lm"])
def test_text_too_short_for_the_shards_is_refused_and_earlier_shards_kept(t5, tmp_path, objective):
    """It wrote empty shards (and a stats.json of 0 examples) over a finished set, exit 0."""
    from bert_jax import objectives
    from bert_jax.data.seq2seq_pipeline import create_seq2seq_data
    from bert_jax.tokenization.t5_vocab import T5Vocab

    out = tmp_path / "shards"
    create_seq2seq_data(str(t5["text"]), str(out), t5["spm"], objective=objective,
                        inputs_length=32, num_shards=2)  # fmt: skip
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (tmp_path / "short.txt").write_text("Hello world.\n")
    with pytest.raises(BertJaxError, match=r"short\.txt: \d+ tokens, too short for one"):
        create_seq2seq_data(str(tmp_path / "short.txt"), str(out), t5["spm"],
                            objective=objective, inputs_length=32, num_shards=2)  # fmt: skip
    raw = objectives.get(objective).lengths(32)[0]
    words = t5["text"].read_text().split()
    vocab = T5Vocab(t5["spm"])
    n = next(n for n in range(len(words)) if len(vocab.encode(" ".join(words[:n]), False)) > raw)
    (tmp_path / "two.txt").write_text(" ".join(words[:n]) + "\n")  # one example's worth
    with pytest.raises(BertJaxError, match=r"make 1 .* fewer than the 2 output files"):
        create_seq2seq_data(str(tmp_path / "two.txt"), str(out), t5["spm"],
                            objective=objective, inputs_length=32, num_shards=2)  # fmt: skip
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize(
    ("objective", "flag", "value", "message"),
    [
        ("span_corruption", "inputs_length", 9, r"--max_seq_length=9: too short for one "
         r"span_corruption example .* use --max_seq_length=10 or more"),
        ("prefix_lm", "inputs_length", 3, r"--max_seq_length=3: .* use --max_seq_length=4"),
        ("span_corruption", "block_bytes", 0, r"--block_bytes=0: must be >= 1"),
        ("prefix_lm", "max_line_chars", -5, r"--max_line_chars=-5: must be >= 0"),
    ],
)  # fmt: skip
def test_data_flags_refused_before_any_output(t5, tmp_path, objective, flag, value, message):
    """--max_seq_length 4 to 9 for span corruption was a numpy traceback ("sequence of 5 does not
    fit 4") mid-run; --block_bytes=0 and --max_line_chars<0 were not checked on this path."""
    from bert_jax.data.seq2seq_pipeline import create_seq2seq_data

    kw = {"inputs_length": 32, flag: value}
    with pytest.raises(BertJaxError, match=message):
        create_seq2seq_data(str(t5["text"]), str(tmp_path / "out"), t5["spm"],
                            objective=objective, **kw)  # fmt: skip
    assert not (tmp_path / "out").exists()
    if flag == "inputs_length":  # the length the message names works
        least = int(message.rsplit("=", 1)[1].split()[0])
        stats = create_seq2seq_data(str(t5["text"]), str(tmp_path / "ok"), t5["spm"],
                                    objective=objective, inputs_length=least)  # fmt: skip
        assert stats["instances"] > 0


# ---- bert-jax generate ---------------------------------------------------------------------------
# Several `bert-jax generate` runs in one process (one JAX start): each parses its own flags.
# Not in pytest's process, where importing the command would define its flags (--batch_size,
# --seed) globally beside other commands' of the same names.
_GENERATE_RUNS = """
import contextlib, io, json, sys
from absl import flags
from bert_jax.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    flags.FLAGS.unparse_flags()
    err = io.StringIO()
    code = 0
    with contextlib.redirect_stderr(err):
        try:
            main(["bert-jax", "generate", *argv])
        except SystemExit as e:
            code = e.code or 0
    out.append({"code": code, "stderr": err.getvalue().strip()})
print(json.dumps(out))
"""


def _generate_runs(runs: list[list[str]]) -> list[dict]:
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _GENERATE_RUNS, json.dumps(runs)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_generate_flags_refused_in_one_line_and_a_finished_output_kept(t5, tmp_path):
    """--batch_size=-1 decoded nothing and replaced a finished output with 0 bytes, exit 0;
    --batch_size=0, a non-UTF-8 input line and an absurd --max_new_tokens (out of memory after
    35 s) were tracebacks. Each is now one line and the earlier output stays as it was."""
    out = tmp_path / "out.jsonl"
    out.write_text('{"input": "a finished run"}\n')
    (tmp_path / "in.txt").write_text("The cat sat on the mat.\nA second line.\n")
    (tmp_path / "latin1.txt").write_bytes("first line\ncaf\xe9 au lait\n".encode("latin-1"))
    (tmp_path / "empty.txt").write_bytes(b"")
    base = [f"--init_checkpoint={t5['model']}", f"--output_file={out}"]
    text = f"--input_file={tmp_path / 'in.txt'}"
    cases = [
        ([text, "--batch_size=-1"], "--batch_size=-1: must be >= 1"),
        ([text, "--batch_size=0"], "--batch_size=0: must be >= 1"),
        ([text, "--max_input_length=0"], "--max_input_length=0: must be >= 1"),
        ([f"--input_file={tmp_path / 'latin1.txt'}"],
         f"--input_file={tmp_path / 'latin1.txt'}: line 2: not UTF-8 (byte 0xe9"),
        ([f"--input_file={tmp_path / 'empty.txt'}"],
         f"--input_file={tmp_path / 'empty.txt'}: empty"),
        # checked against the model and the memory once the model is read: the output's
        # temporary is open by then, and the failure leaves the finished file whole
        ([text, "--max_new_tokens=1000000000"],
         "--max_new_tokens=1000000000: the decoding cache of 8 rows (--batch_size x --num_beams) "
         "would take"),
    ]  # fmt: skip
    results = _generate_runs([base + argv for argv, _ in cases])
    for (argv, message), got in zip(cases, results, strict=True):
        assert got["code"] == 2, (argv, got)
        assert got["stderr"].startswith(f"bert-jax: error: {message}"), (argv, got)
        assert len(got["stderr"].splitlines()) == 1, (argv, got)
        assert out.read_text() == '{"input": "a finished run"}\n', argv
    assert "use --max_new_tokens=" in results[-1]["stderr"]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries


def test_max_new_tokens_bound_follows_the_cache_and_the_memory():
    from bert_jax.arch.seq2seq import seq2seq_preset
    from bert_jax.arch.seq2seq.decoding import (
        GenerateSettings,
        bytes_per_new_token,
        check_max_new_tokens,
    )

    cfg = seq2seq_preset("t5-v1_1-small")  # 6 decoder layers x 8 heads x 64
    per_row = bytes_per_new_token(cfg, 1)
    assert per_row == 6 * 2 * 512 * 4 + 8
    memory = 2 * per_row * 8 * 4 * 1000  # room for 1000 tokens of 8 inputs x 4 beams
    check_max_new_tokens(cfg, GenerateSettings(max_new_tokens=1000, num_beams=4), 8, memory)
    with pytest.raises(BertJaxError, match=r"--max_new_tokens=1001: .* use --max_new_tokens=1000"):
        check_max_new_tokens(cfg, GenerateSettings(max_new_tokens=1001, num_beams=4), 8, memory)


# ---- T5 sizes and its sentencepiece vocabulary ---------------------------------------------------
@pytest.mark.parametrize("key", ["num_heads", "num_layers", "num_decoder_layers", "d_kv"])
def test_t5_zero_sizes_refused_before_the_workdir(tmp_path, key):
    """num_heads=0 wrote config.json and then divided by zero at init (a traceback); zero layers
    trained a model with no encoder (BERT refuses L0)."""
    from bert_jax.arch.seq2seq import Seq2SeqConfig
    from bert_jax.arch.seq2seq.pretrain_run import run_seq2seq_pretraining
    from bert_jax.configs.t5 import get_config

    config = get_config("tiny")
    config[key] = 0
    with pytest.raises(BertJaxError, match=rf"^config\.{key}=0: must be >= 1$"):
        run_seq2seq_pretraining(config, str(tmp_path / "w"))
    assert not (tmp_path / "w").exists()
    with pytest.raises(BertJaxError, match=rf"config\.json: Seq2SeqConfig\.{key} 0: must be >= 1"):
        Seq2SeqConfig.from_dict({key: 0}, "t5/config.json")  # a Hugging Face directory's


def test_t5_spiece_size_beyond_the_text_refused_and_earlier_files_kept(t5, tmp_path):
    """sentencepiece's soft limit silently gave a few dozen pieces for --t5_spiece_size=2000 (and
    build-vocab had written its other files by then)."""
    import os
    import subprocess
    import sys

    from bert_jax.tokenization.t5_vocab import train_t5_spm_bytes

    out = tmp_path / "vocab"
    out.mkdir()
    (out / "vocab.txt").write_text("[PAD]\nearlier\n")
    (out / "spiece.model").write_bytes(b"earlier")
    small = tmp_path / "small.txt"
    small.write_text(t5["text"].read_text()[:3000])
    cmd = [sys.executable, "-m", "bert_jax.cli", "build-vocab", f"--input_file={small}",
           "--vocab_size=200", "--t5_spiece_size=2000", f"--output_dir={out}"]  # fmt: skip
    proc = subprocess.run(cmd, env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    line = proc.stderr.strip()
    assert proc.returncode == 2 and len(line.splitlines()) == 1, proc.stderr[-2000:]
    assert line.startswith("bert-jax: error: --t5_spiece_size=2000: the text gives only "), line
    pieces = int(line.split("only ")[1].split()[0])
    assert 50 < pieces < 2000 and line.endswith(
        f"use --t5_spiece_size={pieces} or less, or more text"
    )
    assert sorted(p.name for p in out.iterdir()) == ["spiece.model", "vocab.txt"]
    assert (out / "spiece.model").read_bytes() == b"earlier"
    assert (out / "vocab.txt").read_text() == "[PAD]\nearlier\n"
    train_t5_spm_bytes(small.read_text().splitlines(), pieces)  # the size it names works
