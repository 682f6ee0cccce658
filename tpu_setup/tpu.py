#!/usr/bin/env python3
"""Create, prepare, run on, copy from, stop and delete a Cloud TPU VM or pod slice with gcloud.

    python tpu_setup/tpu.py create  --name bert --zone us-central2-b --accelerator-type v4-32
    python tpu_setup/tpu.py prepare --name bert --zone us-central2-b --git-url URL --commit SHA
    python tpu_setup/tpu.py run     --name bert --zone us-central2-b --accelerator-type v4-32 \
        -- bert-jax pretrain --config experiments/configs/pretrain.py:base --workdir gs://B/run
    python tpu_setup/tpu.py copy    --name bert --zone us-central2-b --gs gs://B/run --to ./run
    python tpu_setup/tpu.py delete  --name bert --zone us-central2-b

Every subcommand takes --dry-run (print the exact commands, run nothing). `run` starts the same
command on every worker at once (one `gcloud ... ssh --worker=i` each), writes one log per worker
and exits non-zero naming the workers that failed. Standard library only, so it runs on a laptop
with just gcloud; worker counts come from bert_jax.aot.topology (no JAX import).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import pathlib
import re
import shlex
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bert_jax.aot.topology import resolve_slice  # noqa: E402
from bert_jax.errors import BertJaxError  # noqa: E402

VENV = "~/bert-jax-venv"  # on every worker
# Cloud TPU names (lower-case letters, digits, hyphens); anything else could not name a TPU, and
# the name reaches a remote shell (the --detach log file).
_TPU_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
# A wheel file name as PEP 427 spells it: no character a shell or a URL would read specially.
_WHEEL_NAME = re.compile(r"[A-Za-z0-9_.]+-[A-Za-z0-9_.!+]+(-[A-Za-z0-9_.]+){3,4}\.whl")
TPU_VM = ["gcloud", "compute", "tpus", "tpu-vm"]
QUEUED = ["gcloud", "compute", "tpus", "queued-resources"]


class Runner:
    """Runs (or with dry_run prints) gcloud commands given as argument lists."""

    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run

    def __call__(self, cmd: list[str], retries: int = 1, capture: bool = False) -> str:
        print("+ " + shlex.join(cmd), flush=True)
        if self.dry_run:
            return ""
        for attempt in range(retries):
            proc = subprocess.run(cmd, text=True, capture_output=capture)
            if proc.returncode == 0:
                return proc.stdout or ""
            if attempt + 1 < retries:
                print(f"  exit {proc.returncode}, retrying ({attempt + 2}/{retries})", flush=True)
                time.sleep(2)
        err = (proc.stderr or "").strip().splitlines()[-1:] if capture else []
        raise SystemExit(
            f"tpu.py: error: exit {proc.returncode}: {shlex.join(cmd)} {' '.join(err)}"
        )


def _where(args: argparse.Namespace) -> list[str]:
    out = [f"--zone={args.zone}"]
    if args.project:
        out.append(f"--project={args.project}")
    return out


def tpu_name(name: str) -> str:
    if not _TPU_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(
            f"{name!r} is not a TPU name (lower-case letters, digits and hyphens, starting with a "
            "letter, at most 63)"
        )
    return name


def _slice(accelerator_type: str):
    try:
        return resolve_slice(accelerator_type)
    except BertJaxError as e:
        raise SystemExit(f"tpu.py: error: {e}") from None


# ---- create / stop / delete ------------------------------------------------------------------
def create(args: argparse.Namespace, run: Runner) -> None:
    s = _slice(args.accelerator_type)
    acc = s.accelerator_type  # canonical gcloud spelling (v5e-16 -> v5litepod-16)
    version = args.version or s.generation.runtime_version
    if not args.queued:
        cmd = [*TPU_VM, "create", args.name, *_where(args), f"--accelerator-type={acc}",
               f"--version={version}"]  # fmt: skip
        if args.spot:
            cmd.append("--spot")
        run(cmd)
        return
    cmd = [*QUEUED, "create", args.name, f"--node-id={args.name}", *_where(args),
           f"--accelerator-type={acc}", f"--runtime-version={version}"]  # fmt: skip
    if args.spot:
        cmd.append("--spot")
    if args.reserved:
        cmd.append("--reserved")
    if args.valid_until:
        cmd.append(f"--valid-until-duration={args.valid_until}")
    run(cmd)
    describe = [*QUEUED, "describe", args.name, *_where(args), "--format=value(state.state)"]
    deadline = time.time() + args.wait_minutes * 60
    while True:
        state = run(describe, capture=True).strip()
        if run.dry_run or state == "ACTIVE":
            return
        if state in ("FAILED", "SUSPENDED"):
            raise SystemExit(f"tpu.py: error: queued resource {args.name} is {state}")
        if time.time() > deadline:
            raise SystemExit(
                f"tpu.py: error: {args.name} still {state} after {args.wait_minutes} min; "
                "it stays queued (delete it to give up)"
            )
        print(f"  {args.name}: {state or 'unknown'}; waiting for capacity", flush=True)
        time.sleep(30)


def stop(args: argparse.Namespace, run: Runner) -> None:
    run([*TPU_VM, "stop", args.name, *_where(args)])


def delete(args: argparse.Namespace, run: Runner) -> None:
    if args.queued:
        run([*QUEUED, "delete", args.name, *_where(args), "--force", "--quiet"])
    else:
        run([*TPU_VM, "delete", args.name, *_where(args), "--quiet"])


# ---- prepare -----------------------------------------------------------------------------------
def setup_script(package_quoted: str, python: str) -> str:
    """Shell run on every worker: uv-managed Python venv, the project with jax[tpu], a check that
    every host sees the whole slice (jax.distributed.initialize needs all workers at once)."""
    check = (
        'import jax; jax.distributed.initialize(); print("worker", jax.process_index(), "sees",'
        ' jax.local_device_count(), "of", jax.device_count(), jax.devices()[0].device_kind)'
    )
    return " && ".join([
        "set -euo pipefail",
        "python3 -m pip install --user --quiet --upgrade uv",
        f"~/.local/bin/uv venv --allow-existing --seed --python {shlex.quote(python)} {VENV}",
        f"~/.local/bin/uv pip install --python {VENV}/bin/python {package_quoted}",
        f"{VENV}/bin/python -c {shlex.quote(check)}",
    ])  # fmt: skip


def prepare(args: argparse.Namespace, run: Runner) -> None:
    where = [args.name, *_where(args)]
    if args.wheel:
        wheel = pathlib.Path(args.wheel)
        if not run.dry_run and not wheel.is_file():
            raise SystemExit(f"tpu.py: error: --wheel {wheel}: no such file")
        if not _WHEEL_NAME.fullmatch(wheel.name):
            raise SystemExit(f"tpu.py: error: --wheel {wheel}: not a wheel file name "
                             "(name-version-python-abi-platform.whl, as `python -m build` "
                             "writes it)")  # fmt: skip
        # gcloud's scp is flaky on big slices; retry like levanter's spin-up script does.
        run([*TPU_VM, "scp", str(wheel), f"{args.name}:{wheel.name}", *_where(args),
             "--worker=all"], retries=3)  # fmt: skip
        # Double quotes so $HOME expands on the worker; the name was checked to hold no shell
        # (or URL) characters.
        script = setup_script(f'"bert-jax[tpu] @ file://$HOME/{wheel.name}"', args.python)
    else:
        if not (args.git_url and args.commit):
            raise SystemExit("tpu.py: error: prepare needs --wheel, or --git-url and --commit")
        package = f"bert-jax[tpu] @ git+{args.git_url}@{args.commit}"
        script = setup_script(shlex.quote(package), args.python)
    run([*TPU_VM, "ssh", *where, "--worker=all", f"--command={script}"])


# ---- run ---------------------------------------------------------------------------------------
def remote_command(command: list[str], env: list[str], detach_log: str | None) -> str:
    """The shell line a worker runs: the venv first on PATH, the user's words quoted once."""
    for kv in env:
        if "=" not in kv:
            raise SystemExit(f"tpu.py: error: --env {kv!r}: expected KEY=VALUE")
    line = 'env PATH="$HOME/bert-jax-venv/bin:$PATH"'  # $HOME and $PATH expand on the worker
    line += "".join(" " + shlex.quote(kv) for kv in env) + " " + shlex.join(command)
    if detach_log:
        log = "~/bert-jax-logs/" + shlex.quote(detach_log)  # ~ unquoted: it expands on the worker
        return f"mkdir -p ~/bert-jax-logs && nohup {line} > {log} 2>&1 < /dev/null & echo started"
    return line


def num_workers(args: argparse.Namespace, run: Runner) -> int:
    if args.workers:
        return args.workers
    if args.accelerator_type:
        return _slice(args.accelerator_type).hosts
    out = run([*TPU_VM, "describe", args.name, *_where(args),
               "--format=value(networkEndpoints[].ipAddress)"], capture=True)  # fmt: skip
    ips = [ip for ip in out.replace(";", " ").replace(",", " ").split() if ip]
    if not ips:
        raise SystemExit("tpu.py: error: could not count workers; pass --workers or "
                         "--accelerator-type")  # fmt: skip
    return len(ips)


def run_everywhere(args: argparse.Namespace, run: Runner) -> None:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise SystemExit("tpu.py: error: run needs a command after --")
    n = num_workers(args, run)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    log_dir = pathlib.Path(args.log_dir or f"logs/{args.name}-{stamp}")
    remote = remote_command(command, args.env, f"{args.name}.log" if args.detach else None)
    cmds = [[*TPU_VM, "ssh", args.name, *_where(args), f"--worker={i}", f"--command={remote}"]
            for i in range(n)]  # fmt: skip
    if run.dry_run:
        for i, cmd in enumerate(cmds):
            print("+ " + shlex.join(cmd) + f" > {log_dir}/worker-{i}.log 2>&1")
        return
    log_dir.mkdir(parents=True, exist_ok=True)

    def one(i: int) -> int:
        with open(log_dir / f"worker-{i}.log", "w") as log:
            return subprocess.run(cmds[i], stdout=log, stderr=subprocess.STDOUT).returncode

    print(f"running on {n} workers; logs in {log_dir}/worker-<i>.log", flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        codes = list(pool.map(one, range(n)))
    failed = [i for i, c in enumerate(codes) if c != 0]
    for i in failed:
        tail = (log_dir / f"worker-{i}.log").read_text().strip().splitlines()[-3:]
        print(f"worker {i} failed (exit {codes[i]}): {log_dir}/worker-{i}.log", file=sys.stderr)
        for line in tail:
            print(f"  | {line}", file=sys.stderr)
    if failed:
        raise SystemExit(f"tpu.py: error: {len(failed)} of {n} workers failed: "
                         f"{', '.join(map(str, failed))}")  # fmt: skip
    print(f"all {n} workers finished", flush=True)


# ---- copy --------------------------------------------------------------------------------------
def copy(args: argparse.Namespace, run: Runner) -> None:
    if args.gs:
        run(["gcloud", "storage", "cp", "--recursive", args.gs, args.to])
    elif args.remote:
        run([*TPU_VM, "scp", "--recurse", f"{args.name}:{args.remote}", args.to, *_where(args),
             f"--worker={args.worker}"], retries=3)  # fmt: skip
    else:
        raise SystemExit("tpu.py: error: copy needs --gs gs://... or --remote PATH")


# ---- flags -------------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tpu.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--name", required=True, type=tpu_name, help="TPU VM / queued resource")
        sp.add_argument("--zone", required=True, help="e.g. us-central2-b (v4), us-east5-a")
        sp.add_argument("--project", default=None, help="default: gcloud's configured project")
        sp.add_argument("--dry-run", action="store_true", help="print the commands, run none")
        return sp

    c = add("create", "create a TPU VM or pod slice (directly, or as a queued resource)")
    c.add_argument("--accelerator-type", required=True, help="v4-32, v5litepod-16, v5p-64, ...")
    c.add_argument("--version", default=None, help="runtime version; default per generation")
    c.add_argument("--spot", action="store_true", help="spot capacity (preemptible)")
    c.add_argument("--queued", action="store_true", help="use queued resources")
    c.add_argument("--reserved", action="store_true", help="queued: use your reservation")
    c.add_argument("--valid-until", default=None, help="queued: give up after e.g. 6h")
    c.add_argument("--wait-minutes", type=float, default=120, help="queued: wait for ACTIVE")
    pr = add("prepare", "venv + project + jax[tpu] on every worker (--worker=all)")
    pr.add_argument("--wheel", default=None, help="a built wheel (python -m build) to copy")
    pr.add_argument("--git-url", default=None, help="repository URL pip can clone")
    pr.add_argument("--commit", default=None, help="commit (or tag) to install")
    pr.add_argument("--python", default="3.11", help="Python version for the venv (>= 3.11)")
    r = add("run", "run one command on every worker, one log per worker")
    r.add_argument("--accelerator-type", default=None, help="to count workers without gcloud")
    r.add_argument("--workers", type=int, default=0, help="number of workers (hosts)")
    r.add_argument("--env", action="append", default=[], help="KEY=VALUE on every worker")
    r.add_argument("--log-dir", default=None, help="default logs/<name>-<time>")
    r.add_argument(
        "--detach",
        action="store_true",
        help="start with nohup and return; output in ~/bert-jax-logs/<name>.log",
    )
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- bert-jax ...")
    cp = add("copy", "copy results from gs:// or from a worker")
    cp.add_argument("--gs", default=None, help="gs:// workdir to copy")
    cp.add_argument("--remote", default=None, help="path on a worker")
    cp.add_argument("--worker", type=int, default=0)
    cp.add_argument("--to", required=True, help="local destination")
    add("stop", "stop a single-host TPU VM (keeps its disk)")
    d = add("delete", "delete the TPU VM (billing stops)")
    d.add_argument("--queued", action="store_true", help="it was created as a queued resource")
    return p


ACTIONS = {"create": create, "prepare": prepare, "run": run_everywhere, "copy": copy,
           "stop": stop, "delete": delete}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    ACTIONS[args.action](args, Runner(args.dry_run))


if __name__ == "__main__":
    main()
