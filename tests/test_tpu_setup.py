"""tpu_setup/tpu.py against a fake `gcloud` first on PATH that records every call: the right
workers, accelerator type, zone and runtime; the command survives a real shell word for word;
one failing worker is reported; --dry-run runs nothing."""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tpu_setup" / "tpu.py"
FAKE_DIR = pathlib.Path(__file__).resolve().parent / "fake_gcloud"


@pytest.fixture
def gcloud(tmp_path: pathlib.Path):
    log = tmp_path / "gcloud_calls.jsonl"

    def run(*args: str, **env: str) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
        full_env = dict(os.environ, PATH=f"{FAKE_DIR}{os.pathsep}{os.environ['PATH']}")
        full_env.update(FAKE_GCLOUD_LOG=str(log), **env)
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), *args],
            env=full_env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return proc, calls

    return run


def _flag(call: list[str], name: str) -> str:
    return next(a.split("=", 1)[1] for a in call if a.startswith(f"--{name}="))


def test_create_v5e_uses_gcloud_names_zone_and_runtime(gcloud):
    proc, calls = gcloud(
        "create", "--name", "bert", "--zone", "us-east5-a", "--accelerator-type", "v5e-16", "--spot"
    )
    assert proc.returncode == 0, proc.stderr
    assert calls == [
        [
            "compute",
            "tpus",
            "tpu-vm",
            "create",
            "bert",
            "--zone=us-east5-a",
            "--accelerator-type=v5litepod-16",
            "--version=v2-alpha-tpuv5-lite",
            "--spot",
        ]
    ]


def test_create_queued_reserved_waits_for_active(gcloud):
    proc, calls = gcloud(
        "create",
        "--name",
        "q",
        "--zone",
        "us-central2-b",
        "--project",
        "p1",
        "--accelerator-type",
        "v4-32",
        "--queued",
        "--reserved",
    )
    assert proc.returncode == 0, proc.stderr
    create, describe = calls
    assert create[:5] == ["compute", "tpus", "queued-resources", "create", "q"]
    assert "--node-id=q" in create and "--reserved" in create and "--project=p1" in create
    assert _flag(create, "accelerator-type") == "v4-32"
    assert _flag(create, "runtime-version") == "tpu-ubuntu2204-base"
    assert _flag(create, "zone") == "us-central2-b"
    assert describe[2:5] == ["queued-resources", "describe", "q"]


def test_run_reaches_every_worker_and_the_command_survives_a_shell(gcloud, tmp_path):
    words = [
        "bert-jax",
        "pretrain",
        "--config",
        "experiments/configs/pretrain.py:base",
        "--workdir",
        "gs://my bucket/run 1",
        '--config.note=it\'s $HOME; `x` "q"',
    ]
    proc, calls = gcloud(
        "run",
        "--name",
        "bert",
        "--zone",
        "us-central2-b",
        "--accelerator-type",
        "v4-32",
        "--env",
        "XLA_FLAGS=--a --b",
        "--log-dir",
        "logs",
        "--",
        *words,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(_flag(c, "worker") for c in calls) == ["0", "1", "2", "3"]  # v4-32: 4 hosts
    assert all(c[:5] == ["compute", "tpus", "tpu-vm", "ssh", "bert"] for c in calls)
    assert all(_flag(c, "zone") == "us-central2-b" for c in calls)
    for i in range(4):
        assert "fake worker" in (tmp_path / "logs" / f"worker-{i}.log").read_text()

    # Run what a worker would run, in a real shell, with a stand-in bert-jax in the venv.
    home = tmp_path / "home"
    venv_bin = home / "bert-jax-venv" / "bin"
    venv_bin.mkdir(parents=True)
    probe = venv_bin / "bert-jax"
    probe.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "print(json.dumps([sys.argv[1:], os.environ['XLA_FLAGS']]))\n"
    )
    probe.chmod(0o755)
    remote = _flag(calls[0], "command")
    out = subprocess.run(
        ["bash", "-c", remote],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == [words[1:], "--a --b"]


def test_one_failing_worker_is_named_and_the_others_still_run(gcloud, tmp_path):
    proc, calls = gcloud(
        "run",
        "--name",
        "bert",
        "--zone",
        "z",
        "--accelerator-type",
        "v5litepod-16",
        "--log-dir",
        "logs",
        "--",
        "bert-jax",
        "pretrain",
        FAKE_GCLOUD_FAIL_WORKER="2",
    )
    assert proc.returncode != 0
    assert len(calls) == 4
    assert "worker 2 failed (exit 3)" in proc.stderr
    assert "1 of 4 workers failed: 2" in proc.stderr
    assert "fake failure" in proc.stderr  # the tail of its log
    assert "worker 0 failed" not in proc.stderr


def test_run_counts_workers_with_describe(gcloud):
    proc, calls = gcloud(
        "run", "--name", "bert", "--zone", "z", "--", "true", FAKE_GCLOUD_HOSTS="2"
    )
    assert proc.returncode == 0, proc.stderr
    assert calls[0][3] == "describe"
    assert sorted(_flag(c, "worker") for c in calls[1:]) == ["0", "1"]


def test_prepare_addresses_all_workers_with_a_valid_setup_script(gcloud, tmp_path):
    wheel = tmp_path / "bert_jax-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    proc, calls = gcloud("prepare", "--name", "bert", "--zone", "z", "--wheel", str(wheel))
    assert proc.returncode == 0, proc.stderr
    scp, ssh = calls
    assert scp[3] == "scp" and "--worker=all" in scp and f"bert:{wheel.name}" in scp
    assert ssh[3] == "ssh" and "--worker=all" in ssh
    script = _flag(ssh, "command")
    assert "--python 3.11" in script and f"file://$HOME/{wheel.name}" in script
    assert "jax.distributed.initialize()" in script
    subprocess.run(["bash", "-n", "-c", script], check=True)  # parses as shell

    proc, calls = gcloud(
        "prepare",
        "--name",
        "bert",
        "--zone",
        "z",
        "--git-url",
        "https://github.com/me/bert-jax",
        "--commit",
        "abc123",
    )
    assert proc.returncode == 0, proc.stderr
    assert "bert-jax[tpu] @ git+https://github.com/me/bert-jax@abc123" in _flag(
        calls[-1], "command"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["create", "--accelerator-type", "v4-32", "--queued", "--spot"],
        ["prepare", "--git-url", "u", "--commit", "c"],
        ["run", "--accelerator-type", "v4-32", "--", "bert-jax", "pretrain"],
        ["copy", "--gs", "gs://b/run", "--to", "run"],
        ["delete", "--queued"],
        ["stop"],
    ],
)
def test_dry_run_prints_commands_and_calls_nothing(gcloud, args):
    proc, calls = gcloud(args[0], "--name", "bert", "--zone", "z", "--dry-run", *args[1:])
    assert proc.returncode == 0, proc.stderr
    assert calls == []
    printed = [
        shlex.split(line[2:].split(" > ")[0])
        for line in proc.stdout.splitlines()
        if line.startswith("+ ")
    ]
    assert printed and all(cmd[0] == "gcloud" for cmd in printed)
    if args[0] == "run":
        assert len(printed) == 4
    if args[0] == "delete":
        assert printed == [
            [
                "gcloud",
                "compute",
                "tpus",
                "queued-resources",
                "delete",
                "bert",
                "--zone=z",
                "--force",
                "--quiet",
            ]
        ]


def test_names_that_a_remote_shell_would_read_are_refused(gcloud, tmp_path):
    """--name reaches the worker's shell (the --detach log) and the wheel name its pip line:
    both are checked before any gcloud call, and the detach log name is quoted."""
    proc, calls = gcloud("run", "--name", "x;touch pwned", "--zone", "z", "--workers", "1",
                         "--detach", "--", "true")  # fmt: skip
    assert proc.returncode == 2 and calls == []
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "tpu.py run: error: argument --name: 'x;touch pwned' is not a TPU name"
    )
    wheel = tmp_path / 'bert_jax-0.1.0-py3-none-any.whl";touch pwned;".whl'
    wheel.write_bytes(b"PK")
    proc, calls = gcloud("prepare", "--name", "bert", "--zone", "z", "--wheel", str(wheel))
    assert proc.returncode != 0 and calls == []
    assert proc.stderr.strip() == f"tpu.py: error: --wheel {wheel}: not a wheel file name " \
        "(name-version-python-abi-platform.whl, as `python -m build` writes it)"

    proc, calls = gcloud("run", "--name", "bert-1", "--zone", "z", "--workers", "1", "--detach",
                         "--", "true")  # fmt: skip
    remote = _flag(calls[0], "command")
    assert remote.endswith("> ~/bert-jax-logs/bert-1.log 2>&1 < /dev/null & echo started")
    subprocess.run(["bash", "-n", "-c", remote], check=True)
    assert not (tmp_path / "pwned").exists()
