"""Pretraining end to end on real English text (the corpus snapshot): a tiny BERT learns, the
workdir holds metrics.jsonl and TensorBoard events TensorFlow can read, and a run killed with
SIGKILL resumes from its checkpoint to the same per-step losses (bitwise) as an uninterrupted run.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import cpu_compile
import ml_collections
import numpy as np
import pytest

from bert_jax.corpus import snapshot
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.train.config import pretrain_config

SEQ, PRED = 64, 10


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, str]:
    """Held-out documents for eval; a WordPiece vocab built on the train part (one sentencepiece
    thread, so the vocab and hence the learning curve are the same on every run: `tokenizers`'
    trainer breaks ties differently from one process to the next)."""
    from bert_jax.tokenization.vocab_builder import build_vocab

    root = tmp_path_factory.mktemp("pretrain_data")
    snapshot.write_corpus(root / "corpus.txt", max_bytes=600_000)
    docs = (root / "corpus.txt").read_text().strip().split("\n\n")
    n_eval = len(docs) // 8
    (root / "train.txt").write_text("\n\n".join(docs[:-n_eval]) + "\n")
    (root / "eval.txt").write_text("\n\n".join(docs[-n_eval:]) + "\n")
    build_vocab(str(root / "train.txt"), 2000, root, num_threads=1)
    vocab = str(root / "vocab.txt")
    kw = dict(max_seq_length=SEQ, max_predictions_per_seq=PRED)
    create_pretraining_data(str(root / "train.txt"), str(root / "train"), vocab, num_shards=2,
                            dupe_factor=3, **kw)  # fmt: skip
    create_pretraining_data(str(root / "eval.txt"), str(root / "eval"), vocab, dupe_factor=1, **kw)
    return {
        "train": str(root / "train" / "shard-*.tfrecord"),
        "eval": str(root / "eval" / "shard-*.tfrecord"),
        "vocab": vocab,
    }


def _config(data, **kw) -> ml_collections.ConfigDict:
    c = pretrain_config("tiny")
    c.update(
        dict(
            dtype="float32", train_files=data["train"], eval_files=data["eval"],
            vocab_file=data["vocab"], max_seq_length=SEQ, max_predictions_per_seq=PRED,
            global_batch_size=32, learning_rate=2e-3, schedule="constant", warmup_steps=0,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, log_every_steps=10,
            max_eval_steps=20,
        )
    )  # fmt: skip
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 1, 1
    c.update(kw)
    return c


def _baselines(data) -> dict[str, float]:
    """Held-out accuracy of always predicting the most frequent training target (`unigram`), and
    of that at [MASK] and the shown token elsewhere (`unigram_or_copy`: no context used)."""
    from bert_jax.input import EvalInput
    from bert_jax.objectives.baselines import masked_lm_baselines
    from bert_jax.tokenization.vocab import load_vocab

    mask_id = load_vocab(data["vocab"])["[MASK]"]
    return masked_lm_baselines(EvalInput(data["train"], 64, SEQ, PRED),
                               EvalInput(data["eval"], 64, SEQ, PRED), mask_id)  # fmt: skip


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    from bert_jax.runs.pretrain import run_pretraining

    workdir = tmp_path_factory.mktemp("learn")
    config = _config(data, train_steps=300, eval_every_steps=300, checkpoint_every_steps=300)
    result = run_pretraining(config, str(workdir))
    return workdir, result


def _nsp_majority(data) -> float:
    """Held-out next-sentence accuracy of always predicting the more frequent label."""
    from bert_jax.input import EvalInput

    labels = np.concatenate([np.ravel(b["next_sentence_labels"])[b["example_mask"] > 0]
                             for b in EvalInput(data["eval"], 64, SEQ, PRED)])  # fmt: skip
    return max(labels.mean(), 1 - labels.mean())


@pytest.mark.slow  # its `trained` fixture pretrains 300 steps: 110 s measured (shared machine)
def test_tiny_bert_learns_beyond_unigram_baseline(data, trained):
    """Clearing the unigram rate shows the masked-LM path works (targets gathered at their
    positions and learned); it does not show context used: the seeded run (0.089 against unigram
    0.045; seeds 1 and 2: 0.098, 0.087, on the corpus snapshot) is still below the context-free
    bar (0.135: copy the shown token, else the most frequent), which this model size crosses
    only after thousands of steps (experiments/ablations/README.md)."""
    workdir, result = trained
    base = _baselines(data)
    baseline = base["unigram"]
    acc = result.last_eval["eval_masked_lm_accuracy"]
    print(f"held-out masked-LM accuracy {acc:.3f}, unigram baseline {baseline:.3f}, "
          f"context-free {base['unigram_or_copy']:.3f}")  # fmt: skip
    assert 0.01 < baseline < 0.2
    assert acc > 1.5 * baseline and acc > baseline + 0.02
    # NSP barely starts in 300 steps: seeds 0, 1, 2 all answer the majority label (held-out
    # accuracy 0.585 = the majority rate) with a loss of 0.684, 0.679, 0.687, between the best
    # constant's 0.679 and ln 2 = 0.693 (a head that learned nothing). Beating ln 2 by a margin is
    # within seed noise (seed 2 is 0.006 below it), so the loss bound only says it is no worse
    # than an untrained head; the accuracy bound is the one a broken NSP path would fail.
    nsp, majority = result.last_eval["eval_next_sentence_accuracy"], _nsp_majority(data)
    print(f"held-out next-sentence accuracy {nsp:.3f}, majority label {majority:.3f}")
    assert 0.5 <= majority < 0.65 and nsp >= majority - 0.01
    assert result.last_eval["eval_next_sentence_loss"] < np.log(2) + 0.005


@pytest.mark.slow  # the same `trained` fixture
def test_workdir_metrics_and_tensorboard_events(trained):
    workdir, _ = trained
    config = json.loads((workdir / "config.json").read_text())
    assert config["bert"]["hidden_size"] == 128 and config["max_seq_length"] == SEQ
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    train_records = [r for r in records if "loss" in r]
    assert [r["step"] for r in train_records] == list(range(10, 301, 10))
    for key in ("loss", "masked_lm_accuracy", "next_sentence_accuracy", "learning_rate",
                "tokens_per_sec", "mfu", "grad_norm"):  # fmt: skip
        assert all(np.isfinite(r[key]) for r in train_records if key in r), key
    assert train_records[-1]["loss"] < train_records[0]["loss"] - 1.0
    assert "eval_masked_lm_accuracy" in records[-1] and records[-1]["step"] == 300

    import tensorflow as tf  # the reader we did not write

    events = list((workdir / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1
    seen = collections.defaultdict(dict)
    for event in tf.compat.v1.train.summary_iterator(str(events[0])):
        for value in event.summary.value:
            seen[value.tag][event.step] = value.simple_value
    assert set(seen["loss"]) == set(range(10, 301, 10))
    np.testing.assert_allclose(seen["loss"][300], train_records[-1]["loss"], rtol=1e-6)
    assert 300 in seen["eval_masked_lm_accuracy"]


def _command(data, workdir) -> list[str]:
    overrides = dict(
        dtype="float32", train_files=data["train"], vocab_file=data["vocab"],
        max_seq_length=SEQ, max_predictions_per_seq=PRED, global_batch_size=16, train_steps=40,
        warmup_steps=5, learning_rate=1e-3, log_every_steps=1, checkpoint_every_steps=4,
        keep_checkpoints=20, eval_every_steps=0,
    )  # fmt: skip
    config = "experiments/configs/pretrain.py:tiny"
    cmd = [sys.executable, "-m", "bert_jax.cli", "pretrain", "--config", config,
           "--workdir", str(workdir)]  # fmt: skip
    cmd += [f"--config.{k}={v}" for k, v in overrides.items()]
    cmd += ["--config.mesh.data=1", "--config.mesh.fsdp=1", "--config.mesh.tensor=1"]
    return cmd


def _losses(workdir) -> dict[int, float]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return {r["step"]: r["loss"] for r in map(json.loads, lines) if "loss" in r}


@pytest.mark.slow  # four CLI pretraining runs, one SIGKILLed, one SIGTERMed
def test_sigkill_then_sigterm_then_rerun_resumes_bitwise(data, tmp_path):
    repo = pathlib.Path(__file__).resolve().parents[1]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = cpu_compile.FLAGS  # not the environment's device count
    run = dict(cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    killed = tmp_path / "killed"
    proc = subprocess.Popen(_command(data, killed), **run)
    first_ckpt = killed / "checkpoints" / "8"
    deadline = time.time() + 600
    while not first_ckpt.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    out = proc.communicate()[0]
    assert proc.returncode == -signal.SIGKILL, out
    steps_before = max(_losses(killed))
    assert steps_before < 40, "the run finished before it could be killed"

    # The rerun gets a preemption notice: it saves its step and exits 2, since a launch script
    # going on to phase 2 or fine-tuning would build on an unfinished run.
    saved = [int(p.name) for p in (killed / "checkpoints").iterdir() if p.name.isdigit()]
    first_save = max(saved) + 4  # the rerun's own (checkpoint_every_steps=4)
    proc = subprocess.Popen(_command(data, killed), **run)
    deadline = time.time() + 600
    while not (killed / "checkpoints" / str(first_save)).exists() and proc.poll() is None:
        assert time.time() < deadline, "the rerun saved nothing in 10 minutes"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate()[0]
    assert "resumed from" in out, out
    stopped = re.search(r"stopped by SIGTERM at step (\d+) of 40 .*Rerun the same command", out)
    assert proc.returncode == 2 and stopped, out
    assert first_save <= int(stopped[1]) < 40 and max(_losses(killed)) == int(stopped[1])

    resumed = subprocess.run(_command(data, killed), **run, timeout=600)
    assert resumed.returncode == 0, resumed.stdout
    assert "resumed from" in resumed.stdout

    straight = tmp_path / "straight"
    ref = subprocess.run(_command(data, straight), **run, timeout=600)
    assert ref.returncode == 0, ref.stdout
    expected, got = _losses(straight), _losses(killed)
    assert sorted(expected) == list(range(1, 41))
    assert got == expected  # bitwise: the same float32 values, step by step
