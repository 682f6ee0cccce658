"""Fault matrix, the `bert-jax` command (issue 17): bad flags, bad config files and unwritable
output locations end in exactly one `bert-jax: error:` line naming the flag or file, exit
status 2, before any work. Each case is one short run of the real command."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*args: str, timeout: int = 300) -> str:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-m", "bert_jax.cli", *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stderr)
    return lines[0]


@pytest.fixture(scope="module")
def unwritable(tmp_path_factory) -> str:
    """A directory path below a regular file: not creatable, even for root."""
    blocker = tmp_path_factory.mktemp("unwritable") / "a_file"
    blocker.write_text("x")
    return str(blocker / "out")


def test_config_file_that_is_not_python(tmp_path):
    bad = tmp_path / "settings.txt"
    bad.write_text("learning_rate: 1e-4 {\n")
    line = _run("pretrain", f"--config={bad}", f"--workdir={tmp_path / 'w'}")
    assert line.startswith(f"bert-jax: error: {bad}:1: --config file is not valid Python")


def test_unknown_config_key(tmp_path):
    line = _run("pretrain", "--config=pretrain.py:tiny", "--config.learnin_rate=1e-3",
                f"--workdir={tmp_path / 'w'}")  # fmt: skip
    assert line == (
        "bert-jax: error: --config.learnin_rate: the config has no field 'learnin_rate' "
        "(did you mean 'learning_rate'?)"
    )
    assert not (tmp_path / "w").exists()


def test_extract_features_batch_size_zero(tmp_path, minilm_dir):
    (tmp_path / "in.txt").write_text("The cat sat on the mat.\n")
    line = _run("extract-features", f"--input_file={tmp_path / 'in.txt'}",
                f"--output_file={tmp_path / 'out.jsonl'}", f"--init_checkpoint={minilm_dir}",
                "--batch_size=0")  # fmt: skip
    assert line == "bert-jax: error: --batch_size=0: must be >= 1"


def test_extract_features_empty_input(tmp_path, minilm_dir):
    (tmp_path / "in.txt").write_bytes(b"")
    line = _run("extract-features", f"--input_file={tmp_path / 'in.txt'}",
                f"--output_file={tmp_path / 'out.jsonl'}",
                f"--init_checkpoint={minilm_dir}")  # fmt: skip
    assert (
        line == f"bert-jax: error: --input_file={tmp_path / 'in.txt'}: no text (the file is empty)"
    )
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(
    "subcommand", ["build-vocab", "pretrain", "finetune", "convert", "demo", "ablate"]
)
def test_unwritable_output_refused_before_work(subcommand, unwritable, minilm_dir, tmp_path):
    (tmp_path / "corpus.txt").write_text("The cat sat on the mat.\nIt was warm.\n")
    args = {
        "build-vocab": [f"--input_file={tmp_path / 'corpus.txt'}", f"--output_dir={unwritable}"],
        "pretrain": ["--config=pretrain.py:tiny", f"--workdir={unwritable}"],
        "finetune": ["--config=glue.py:mrpc", f"--workdir={unwritable}",
                     f"--config.init_checkpoint={minilm_dir}", f"--config.data_dir={tmp_path}"],
        "convert": [f"--init_checkpoint={minilm_dir}", f"--output_dir={unwritable}"],
        "demo": [f"--workdir={unwritable}"],
        "ablate": ["--table=5", "--scale=cpu", f"--workdir={unwritable}"],
    }[subcommand]  # fmt: skip
    flag = "--output_dir" if subcommand in ("build-vocab", "convert") else "--workdir"
    line = _run(subcommand, *args)
    assert line.startswith(f"bert-jax: error: {flag}={unwritable}: cannot write")
    assert line.endswith("Not a directory")


def test_max_seq_length_beyond_the_position_table(tmp_path, minilm_dir):
    (tmp_path / "in.txt").write_text("The cat sat on the mat.\n")
    line = _run("extract-features", f"--input_file={tmp_path / 'in.txt'}",
                f"--output_file={tmp_path / 'out.jsonl'}", f"--init_checkpoint={minilm_dir}",
                "--max_seq_length=1000")  # fmt: skip
    assert (
        line == "bert-jax: error: --max_seq_length 1000 > max_position_embeddings 512 of the model"
    )


def test_missing_config_file(tmp_path):
    line = _run("pretrain", f"--config={tmp_path / 'nope.py'}", f"--workdir={tmp_path / 'w'}")
    assert line.startswith(f"bert-jax: error: --config: {tmp_path / 'nope.py'}: no such file")
    assert not (tmp_path / "w").exists()


_KILLED_BEFORE_THE_RENAME = """
import os, signal, sys
real_replace = os.replace  # what epath's local backend renames with
def replace(src, dst, *a, **k):  # SIGKILL with model.safetensors whole under its hidden name
    if os.path.basename(dst) == "model.safetensors":
        os.kill(os.getpid(), signal.SIGKILL)
    return real_replace(src, dst, *a, **k)
os.replace = replace
from bert_jax.cli import main
sys.argv[0] = "bert-jax"
main()
"""


def test_killed_export_leaves_a_temporary_the_rerun_removes(tmp_path, minilm_dir):
    """A convert killed before its rename leaves a model-sized hidden file in its staging
    directory; the rerun (another pid) removes both along with writing the export."""
    out = tmp_path / "hf"
    args = ["convert", f"--init_checkpoint={minilm_dir}", f"--output_dir={out}"]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    killed = subprocess.run([sys.executable, "-c", _KILLED_BEFORE_THE_RENAME, *args], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]
    left = list(out.glob(".export-*/.model.safetensors.tmp-*"))
    assert len(left) == 1 and left[0].stat().st_size > 10_000_000
    r = subprocess.run([sys.executable, "-m", "bert_jax.cli", *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"
    ]  # fmt: skip


# Started as from a terminal: a test runner launched in the background (a non-interactive shell's
# `&`) ignores SIGINT, and its children inherit that, which Python and the CLI then keep.
_INTERRUPTED_BEFORE_THE_RENAME = _KILLED_BEFORE_THE_RENAME.replace("SIGKILL", "SIGINT").replace(
    "\nimport os, signal, sys\n",
    "\nimport os, signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n",
)


def test_interrupted_export_is_one_line_and_leaves_nothing_that_loads(tmp_path, minilm_dir):
    """Ctrl-C (SIGINT) while convert moves its export in: exit 130 with one line, no config.json
    in the output directory (nothing a loader takes for a model), and the rerun completes."""
    out = tmp_path / "hf"
    args = ["convert", f"--init_checkpoint={minilm_dir}", f"--output_dir={out}"]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    stopped = subprocess.run([sys.executable, "-c", _INTERRUPTED_BEFORE_THE_RENAME, *args],
                             cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=300)  # fmt: skip
    assert stopped.returncode == 130, stopped.stderr[-2000:]
    assert stopped.stderr == ("bert-jax: convert interrupted (SIGINT); what it finished is kept: "
                              "rerun the same command to go on\n")  # fmt: skip
    assert not (out / "config.json").exists()
    r = subprocess.run([sys.executable, "-m", "bert_jax.cli", *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert (out / "config.json").exists() and not list(out.glob(".export-*"))


OUTPUT_FILE_COMMANDS = ["extract-features", "attention-map", "generate",
                        "create-pretraining-data", "pretrain-export"]  # fmt: skip


@pytest.mark.parametrize("subcommand", OUTPUT_FILE_COMMANDS)
def test_unwritable_output_file_is_one_line(subcommand, unwritable, minilm_dir, tmp_path):
    """The output-file commands (the temporary's cleanup below a regular file raised), and a
    pretraining run's export directory (checked before training, not after it)."""
    (tmp_path / "in.txt").write_text("The cat sat on the mat.\n")
    model, text = f"--init_checkpoint={minilm_dir}", f"--input_file={tmp_path / 'in.txt'}"
    out = f"{unwritable}/x.jsonl"
    args, named = {
        "extract-features": ([text, model, f"--output_file={out}"], f"{out}: cannot write"),
        "attention-map": ([model, "--text=The cat sat.", f"--output_file={unwritable}/x.png"],
                          f"{unwritable}/x.png: cannot write"),
        "generate": ([text, model, f"--output_file={out}"], f"{out}: cannot write"),
        "create-pretraining-data": ([text, f"--vocab_file={minilm_dir / 'vocab.txt'}",
                                     f"--output_dir={unwritable}"], f"{unwritable}: cannot"),
        "pretrain-export": (["--config=pretrain.py:tiny", f"--workdir={tmp_path / 'w'}",
                             f"--config.export_hf_dir={unwritable}"],
                            f"--config.export_hf_dir={unwritable}: cannot write"),
    }[subcommand]  # fmt: skip
    line = _run(subcommand.removesuffix("-export"), *args)
    assert line.startswith(f"bert-jax: error: {named}") and line.endswith("Not a directory"), line


def test_ctrl_c_inside_asyncio_run_still_interrupts():
    """Orbax saves through asyncio.run, which swaps Python's SIGINT handler for one that cancels
    its task; a task that finishes anyway swallowed the Ctrl-C, and `bert-jax ablate` ran on to
    the end (issue 55's hunt). With the CLI's handler installed the interrupt is raised."""
    import asyncio
    import contextlib
    import signal

    from bert_jax import cli

    async def save_that_finishes_anyway() -> str:
        os.kill(os.getpid(), signal.SIGINT)
        with contextlib.suppress(asyncio.CancelledError):  # as a save completing its writes does
            await asyncio.sleep(5)
        return "done"

    before = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        assert asyncio.run(save_that_finishes_anyway()) == "done"  # lost: the fault itself
        cli._interrupt_on_sigint()
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(save_that_finishes_anyway())
    finally:
        signal.signal(signal.SIGINT, before)
