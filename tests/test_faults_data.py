"""Fault matrix, data preparation (issue 17): absurd flags and non-UTF-8 corpora refused before
any work, leftovers of earlier runs (other --num_shards, hidden .tmp shards of a killed run)
replaced, a killed worker reported in one line, workers that exit with their parent, a full disk
while writing shards, and build-vocab's output set surviving a kill. Real text (the embedded
corpus), real processes and signals."""

from __future__ import annotations

import logging
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from bert_jax.corpus import embedded as embedded_corpus
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.errors import BertJaxError
from bert_jax.shards.tfrecord import read_records

ROOT = pathlib.Path(__file__).resolve().parents[1]
KW = dict(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    from bert_jax.tokenization.vocab_builder import build_vocab

    root = tmp_path_factory.mktemp("fault_corpus")
    embedded_corpus.write_corpus(root / "corpus.txt", max_bytes=60_000)
    build_vocab(str(root / "corpus.txt"), 600, root / "vocab", num_threads=1)
    return {"root": root, "text": root / "corpus.txt", "vocab": root / "vocab" / "vocab.txt"}


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> pathlib.Path:
    """1.5 MB of text (x10 dupe passes): a multi-worker run lasts seconds, long enough to kill."""
    path = tmp_path_factory.mktemp("big") / "big.txt"
    embedded_corpus.write_corpus(path, max_bytes=1_500_000)
    return path


def _make(corpus, inputs, out, **kw):
    return create_pretraining_data(str(inputs), str(out), str(corpus["vocab"]), **{**KW, **kw})


# ---- flags refused before work --------------------------------------------------------------
@pytest.mark.parametrize(
    "flag,value,message",
    [
        ("block_bytes", 0, r"--block_bytes=0: must be >= 1"),
        ("num_workers", 0, r"--num_workers=0: must be >= 1"),
        ("num_workers", -2, r"--num_workers=-2: must be >= 1"),
        ("max_line_chars", -5, r"--max_line_chars=-5: must be >= 0"),
    ],
)
def test_absurd_data_flags_refused(corpus, tmp_path, flag, value, message):
    with pytest.raises(BertJaxError, match=message):
        _make(corpus, corpus["text"], tmp_path / "out", **{flag: value})
    assert not (tmp_path / "out").exists()


# ---- corpora that are not UTF-8 -------------------------------------------------------------
def test_utf16_corpus_refused(corpus, tmp_path):
    path = tmp_path / "utf16.txt"
    path.write_bytes(corpus["text"].read_text()[:5000].encode("utf-16"))
    with pytest.raises(BertJaxError, match=r"utf16\.txt: UTF-16/32 text \(byte-order mark\)"):
        _make(corpus, path, tmp_path / "out")


def test_binary_corpus_refused(corpus, tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(256)) * 100)
    with pytest.raises(BertJaxError, match=r"blob\.bin: NUL bytes in the first 25600 bytes"):
        _make(corpus, path, tmp_path / "out")


def test_latin1_corpus_refused(corpus, tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(("Le café était fermé à côté de l'école.\n" * 50).encode("latin-1"))
    with pytest.raises(BertJaxError, match=r"latin1\.txt: 50 of the first 50 lines are not UTF-8"):
        _make(corpus, path, tmp_path / "out")


def test_few_latin1_lines_kept_counted_and_warned(corpus, tmp_path, caplog):
    text = corpus["text"].read_bytes() + "Crème brûlée.\nÀ la carte.\n".encode("latin-1")
    path = tmp_path / "mostly_utf8.txt"
    path.write_bytes(text)
    with caplog.at_level(logging.WARNING):
        stats = _make(corpus, path, tmp_path / "out")
    assert stats["invalid_utf8_lines"] == 2 and stats["instances"] > 0
    assert "2 input lines were not valid UTF-8" in caplog.text


# ---- leftovers of earlier runs --------------------------------------------------------------
def test_rerun_with_other_num_shards_replaces_the_old_set(corpus, tmp_path, caplog):
    out = tmp_path / "out"
    _make(corpus, corpus["text"], out, num_shards=3)
    with caplog.at_level(logging.WARNING):
        stats = _make(corpus, corpus["text"], out, num_shards=2)
    names = sorted(p.name for p in out.glob("*.tfrecord"))
    assert names == ["shard-00000-of-00002.tfrecord", "shard-00001-of-00002.tfrecord"]
    assert sum(1 for p in out.glob("*.tfrecord") for _ in read_records(p)) == stats["instances"]
    assert "removed 3 shard(s) of an earlier run with another --num_shards" in caplog.text


def _workers(pid: int, every: bool = False) -> list[int]:
    """Pool worker processes of `pid` (with `every`, also multiprocessing's resource tracker)."""
    kids = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and (every or b"spawn_main" in cmdline):
            kids.append(int(stat.parent.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start(big, corpus, out) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "bert_jax.cli", "create-pretraining-data", f"--input_file={big}",
           f"--vocab_file={corpus['vocab']}", f"--output_dir={out}", "--num_shards=2",
           "--num_workers=2", "--block_bytes=16384", "--dupe_factor=10", "--max_seq_length=32",
           "--max_predictions_per_seq=5"]  # fmt: skip
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


def _wait_for_workers(proc, out) -> list[int]:
    """The two worker pids, once shards are being written (hidden .tmp files exist)."""
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        workers = _workers(proc.pid)
        tmps = (
            [p for p in out.glob(".shard-*.tmp-*") if p.stat().st_size > 0] if out.exists() else []
        )
        if len(workers) >= 2 and tmps:
            return workers
        time.sleep(0.02)
    raise AssertionError(f"no workers writing shards (rc {proc.poll()}): {proc.communicate()}")


def test_killed_main_process_workers_exit_and_rerun_cleans_temporaries(big, corpus, tmp_path):
    out = tmp_path / "out"
    proc = _start(big, corpus, out)
    _wait_for_workers(proc, out)
    children = _workers(proc.pid, every=True)  # workers (also any still starting) + tracker
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()
    deadline = time.time() + 30
    while any(map(_alive, children)) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(map(_alive, children)), "data processes outlived their killed parent"
    assert list(out.glob(".shard-*.tmp-*")) and not list(out.glob("shard-*.tfrecord"))
    stats = _make(corpus, corpus["text"], out, num_shards=2)  # the rerun (smaller input)
    assert not list(out.glob(".*.tmp-*"))
    assert (
        sum(1 for p in out.glob("shard-*.tfrecord") for _ in read_records(p)) == stats["instances"]
    )
    _make(corpus, corpus["text"], tmp_path / "straight", num_shards=2)  # never interrupted
    for name in ("shard-00000-of-00002.tfrecord", "shard-00001-of-00002.tfrecord"):
        assert (out / name).read_bytes() == (tmp_path / "straight" / name).read_bytes()


def test_killed_worker_is_one_line_and_no_shards(big, corpus, tmp_path):
    out = tmp_path / "out"
    proc = _start(big, corpus, out)
    workers = _wait_for_workers(proc, out)
    os.kill(workers[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=600)  # a hang guard; two xdist workers share the cores
    assert proc.returncode == 2, err
    assert err.strip().splitlines() == [
        "bert-jax: error: a data worker process died (killed, or out of memory?); no shards were "
        "written, rerun (fewer --num_workers or smaller --block_bytes need less memory)"
    ]
    assert not list(out.glob("shard-*")) and not list(out.glob(".*.tmp-*"))


# ---- full disk ------------------------------------------------------------------------------
def test_disk_full_while_writing_shards_is_one_line_and_leaves_nothing(corpus, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode:
        pytest.skip(f"cannot mount a small tmpfs here ({r.stderr.strip()})")
    try:
        with pytest.raises(
            BertJaxError,
            match=r"shard-0000\d-of-00002\.tfrecord: cannot write output: No space left on device",
        ):
            _make(corpus, corpus["text"], disk / "out", num_shards=2, dupe_factor=3)
        assert list((disk / "out").iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


# ---- build-vocab ----------------------------------------------------------------------------
def test_build_vocab_killed_leaves_the_old_set_and_rerun_cleans_up(corpus, big, tmp_path):
    """The new vocab.txt, spm.model, spm.vocab and vocab_stats.json are all complete before the
    first is renamed into place: a run killed after training sentencepiece, while building the
    vocab, leaves the old set as it was."""
    import shutil

    out = tmp_path / "vocab"
    shutil.copytree(corpus["vocab"].parent, out)
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    cmd = [sys.executable, "-m", "bert_jax.cli", "build-vocab", f"--input_file={big}",
           "--vocab_size=800", f"--output_dir={out}", "--num_threads=1"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ, JAX_PLATFORMS="cpu"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    # Kill once sentencepiece is trained (its staging dir is gone) while the vocab and its [UNK]
    # stats are still being computed: file-by-file writing had a new spm.model by then.
    staging, deadline = False, time.time() + 120
    while proc.poll() is None and time.time() < deadline:
        present = bool(list(out.glob(".build-vocab-*")))
        if staging and not present:
            break
        staging = staging or present
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert staging and proc.returncode == -signal.SIGKILL, "build-vocab ended before the kill"
    assert {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")} == old

    (out / ".build-vocab-left-by-a-killed-run").mkdir()  # as a kill during training leaves
    from bert_jax.tokenization.vocab_builder import build_vocab

    stats = build_vocab(str(corpus["text"]), 650, out, num_threads=1)
    assert not list(out.glob(".*"))
    assert len((out / "vocab.txt").read_text().splitlines()) == stats["vocab_size"] == 650


_KILLED_WHILE_RENAMING = """
import os, signal, sys
real_replace = os.replace
def replace(src, dst, *a, **k):  # SIGKILL right after the first file of the set is in place
    real_replace(src, dst, *a, **k)
    if os.path.basename(dst) in ("vocab.txt", "spm.model", "spm.vocab", "vocab_stats.json"):
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
from bert_jax.tokenization.vocab_builder import build_vocab
build_vocab(sys.argv[1], 650, sys.argv[2], num_threads=1)
"""


def test_build_vocab_killed_between_renames_is_completed_by_the_next_reader(corpus, tmp_path):
    """The worst moment: one file of the new set renamed, three not. The journal written before
    the first rename lets the next loader finish the set, so no reader sees a mix."""
    import shutil

    from bert_jax.tokenization.sentencepiece_tokenizer import load_sentencepiece
    from bert_jax.tokenization.vocab import load_vocab

    out = tmp_path / "vocab"
    shutil.copytree(corpus["vocab"].parent, out)
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _KILLED_WHILE_RENAMING, str(corpus["text"]),
                           str(out)], cwd=ROOT, env=env, capture_output=True)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert (out / ".publish-journal.json").exists()
    assert len((out / "vocab.txt").read_text().splitlines()) == 650  # the first, renamed
    assert '"vocab_size": 600' in (out / "vocab_stats.json").read_text()  # still the old one

    assert len(load_vocab(out / "vocab.txt")) == 650  # the loader completes the set
    assert '"vocab_size": 650' in (out / "vocab_stats.json").read_text()
    assert load_sentencepiece(out / "spm.model").GetPieceSize() == (
        int((out / "vocab_stats.json").read_text().split('"spm_pieces": ')[1].split(",")[0])
    )
    assert not list(out.glob(".*"))  # journal and staged files gone


# ---- seeds ----------------------------------------------------------------------------------
def test_negative_random_seed_refused_before_work(corpus, tmp_path):
    """numpy's seeding (span corruption) raised mid-run on it; the reference-compatible mode's
    random.Random(-1) silently equals seed 1. Refused for every objective, before any output."""
    from bert_jax.tokenization.t5_vocab import train_t5_spm

    sentences = [s for s in corpus["text"].read_text().splitlines() if s.strip()]
    spm = train_t5_spm(sentences, tmp_path / "spm", vocab_size=300)
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    for objective, vocab in (("span_corruption", f"--spm_model={spm}"),
                             ("nsp", f"--vocab_file={corpus['vocab']}")):  # fmt: skip
        cmd = [sys.executable, "-m", "bert_jax.cli", "create-pretraining-data",
               f"--objective={objective}", f"--input_file={corpus['text']}", vocab,
               f"--output_dir={tmp_path / 'out'}", "--random_seed=-1"]  # fmt: skip
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stderr.strip().splitlines() == [
            "bert-jax: error: --random_seed=-1: must be >= 0"
        ], (objective, r.stderr[-2000:])
        assert not (tmp_path / "out").exists()


def test_empty_corpus_refused_and_the_earlier_shards_kept(corpus, tmp_path):
    """A 0-byte corpus wrote empty shards over an earlier run's (training then refuses them)."""
    out = tmp_path / "out"
    _make(corpus, corpus["text"], out, num_shards=2)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(BertJaxError, match=r"empty\.txt: no text \(empty, or blank lines only\)"):
        _make(corpus, tmp_path / "empty.txt", out, num_shards=2)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
