"""A new user's CLI: `--help` on every subcommand exits 0 with its own flags and the config fields
(default and meaning), and configs are found by name from any directory (they are installed with
the package; experiments/configs/ paths keep working)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

from bert_jax.cli import SUBCOMMANDS

ROOT = pathlib.Path(__file__).parent.parent


def _run(args: list[str], cwd: pathlib.Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bert_jax.cli", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _own_flags(module: str) -> list[str]:
    """The flags a command module defines, read from its source (not from absl)."""
    source = (ROOT / "bert_jax" / "commands" / f"{module}.py").read_text()
    return re.findall(r"DEFINE_\w+\(\s*\"(\w+)\"", source)


@pytest.fixture(scope="module")
def helps(tmp_path_factory) -> dict[str, tuple[int, str, str]]:
    """`bert-jax <sub> --help` for every subcommand, run in parallel from an empty directory."""
    cwd = tmp_path_factory.mktemp("anywhere")
    procs = {name: _run([name, "--help"], cwd) for name in SUBCOMMANDS}
    procs["pretrain_cpu"] = _run(["pretrain", "--config=pretrain_cpu.py", "--help"], cwd)
    procs["bad_config"] = _run(["pretrain", "--config=nope.py", "--workdir=w"], cwd)
    old = ["--config", "experiments/configs/pretrain_cpu.py", "--config.train_files=/nonexistent/*"]
    procs["old_path"] = _run(["pretrain", *old, "--workdir=w"], cwd)
    procs["typo_flag"] = _run(["build-vocab", "--vocab_siz=100"], cwd)
    procs["bad_value"] = _run(["ablate", "--table=99"], cwd)
    outs = {k: p.communicate(timeout=300) for k, p in procs.items()}
    return {k: (procs[k].returncode, *out) for k, out in outs.items()}


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_help_lists_the_subcommands_own_flags(helps, name):
    rc, out, err = helps[name]
    assert rc == 0, err
    assert "Try --helpfull" not in out + err
    # the usage example keeps its line breaks (no `\`-newline joining lines in the docstring)
    assert not re.search(r"\S {4,}\[?--", out.split("\nflags:")[0]), out
    module = SUBCOMMANDS[name][0]
    flags = _own_flags(module)
    assert flags, module
    for flag in flags:
        assert f"--{flag}" in out, (name, flag)


@pytest.mark.parametrize("name", ["pretrain", "finetune", "compile"])
def test_help_lists_config_fields_with_defaults_and_meaning(helps, name):
    out = helps[name][1]
    assert re.search(r"--config\.learning_rate=\S+", out)
    # the meaning is the comment beside the key in bert_jax/train/config.py
    line = next(x for x in out.splitlines() if "--config.optimizer=" in x)
    assert "adam_reference" in line and "lamb" in line
    if name == "finetune":  # every task family's own keys
        assert "--config.doc_stride=128" in out and "--config.lstm_size=768" in out


def test_help_shows_the_given_configs_values(helps):
    out = helps["pretrain_cpu"][1]
    assert "config fields of pretrain_cpu.py" in out
    assert re.search(r"--config\.max_seq_length=None +tokens per sequence; None: the shards'", out)
    assert "--config.global_batch_size=32" in out and "--config.train_steps=3000" in out


def test_configs_by_name_from_any_directory(helps):
    rc, _, err = helps["bad_config"]
    assert rc == 2 and err.count("\n") == 1
    assert "--config: nope.py: no such file" in err and "pretrain_cpu.py" in err
    # an experiments/configs path typed outside the checkout still finds the config: the run
    # gets as far as its training files
    rc, _, err = helps["old_path"]
    assert (rc, err) == (2, "bert-jax: error: /nonexistent/*: no files match\n")


def test_configs_are_package_data_and_old_paths_are_the_same_configs():
    from importlib import resources

    installed = {p.name for p in resources.files("bert_jax.configs").iterdir()}
    for path in (ROOT / "experiments" / "configs").glob("*.py"):
        assert path.name in installed
        spec = importlib.util.spec_from_file_location(path.stem, path)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        new = importlib.import_module(f"bert_jax.configs.{path.stem}")
        assert old.get_config().to_dict() == new.get_config().to_dict()


def test_no_libtpu_probing_on_a_cpu_machine(monkeypatch):
    """This machine has no TPU or GPU: the CLI pins JAX to the CPU (no libtpu messages or
    lockfile) except for `compile`, which needs libtpu's compile-only TPU devices."""
    from bert_jax import quiet

    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    assert not quiet.accelerator_attached()
    assert quiet.cpu_only_platform("compile", []) is None
    assert quiet.cpu_only_platform("ablate", ["--scale=tpu"]) is None
    assert "JAX_PLATFORMS" not in os.environ
    assert quiet.cpu_only_platform("finetune", []) == "cpu"
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")  # a user's choice is kept
    assert quiet.cpu_only_platform("finetune", []) is None


def test_each_field_gets_its_own_meaning(helps):
    """A comment block written for one key does not describe the keys after it; a clause that names
    a key is that key's meaning; a fine-tuning config reads the fine-tuning schema's comments."""
    from bert_jax.cli_help import field_docs

    docs = field_docs(
        "    # < 1: layer i's rate x decay^(L - i) (ELECTRA fine-tuning: 0.8)\n"
        "    c.layerwise_lr_decay = 1.0\n"
        "    c.grad_accum_steps = 1\n"
        "    # Bookkeeping (bert_jax.train.loop).\n"
        "    c.log_every_steps = 100\n"
        "    c.keep_checkpoints = 3  # newest checkpoints kept\n"
        "    c.async_checkpoints = True\n"
        "    # Vocab: vocab_file is the checkpoint's; do_lower_case None = the checkpoint's.\n"
        "    c.vocab_file = ''\n"
        "    c.do_lower_case = None\n"
    )
    assert docs["layerwise_lr_decay"].startswith("< 1: layer i's rate")
    assert "grad_accum_steps" not in docs
    assert "async_checkpoints" not in docs  # a section heading is no key's meaning
    assert docs["do_lower_case"] == "do_lower_case None = the checkpoint's."

    def line(name: str, key: str) -> str:
        return next(x for x in helps[name][1].splitlines() if f"--config.{key}=" in x)

    for name in ("pretrain", "finetune"):
        assert "microbatches" in line(name, "grad_accum_steps")
    assert "glue | squad | ner | swag" in line("finetune", "task_family")
    assert "the checkpoint's setting" in line("finetune", "do_lower_case")
    assert "sequences per evaluation batch" in line("finetune", "eval_batch_size")
    assert "strict mode" in helps["finetune"][1].split("ner.py adds:")[1].split("\n\n")[0]


def test_flag_errors_are_one_line_pointing_to_help(helps):
    """absl's own parse errors (unknown flag, bad value) are ours: one line, exit 2, and they point
    to --help (not absl's "Pass --helpshort or --helpfull")."""
    rc, _, err = helps["typo_flag"]
    assert (rc, err.count("\n")) == (2, 1), err
    assert err.startswith("bert-jax: error: Unknown command line flag 'vocab_siz'")
    assert "vocab_size" in err and "bert-jax build-vocab --help" in err
    rc, _, err = helps["bad_value"]
    assert (rc, err.count("\n")) == (2, 1), err
    assert "--table=99" in err and "helpfull" not in err
