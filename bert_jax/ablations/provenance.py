"""Where an ablation result came from: the code (commit), the machine (device) and digests of
what every run of a workdir shares (its settings, the pretraining text, the downstream suite).

Two results are comparable when their `shared` digests are equal, whichever machine or commit
made them; the commit and device are recorded, not matched.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import subprocess
from collections.abc import Iterable
from typing import TYPE_CHECKING

from etils import epath

if TYPE_CHECKING:
    from bert_jax.ablations.scales import Scale

_SOURCE = pathlib.Path(__file__).resolve().parents[2]  # the checkout bert_jax was imported from


@functools.cache
def commit() -> str:
    """The short commit of the checkout bert_jax runs from, "+dirty" when its tracked files
    differ from it; the package version when it is not a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(_SOURCE), "describe", "--always", "--dirty",
                              "--abbrev=7", "--match=^$"], capture_output=True, text=True,
                             check=True, timeout=30)  # fmt: skip
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"bert-jax {version('bert-jax')}"
        except PackageNotFoundError:
            return "unknown"


@functools.cache
def device() -> str:
    """The device an ablation's runs use (one: bert_jax.ablations.harness), e.g. "cpu, 2 cores"
    or "gpu NVIDIA H200"."""
    import jax

    backend = jax.default_backend()
    if backend == "cpu":
        return f"cpu, {os.cpu_count()} cores"
    return f"{backend} {jax.local_devices()[0].device_kind}"


def digest_files(paths: list[tuple[str, epath.Path]]) -> str:
    """sha256 over (name, file) pairs in the given order: each name and its content's digest."""
    h = hashlib.sha256()
    for name, path in paths:
        h.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def files_under(root: epath.Path, name: str = "") -> list[epath.Path]:
    """Every file under `root` (those called `name`, when given), sorted; walked, as epath
    refuses recursive globs."""
    found = [d / f for d, _, files in root.walk() for f in files if not name or f == name]
    return sorted(found)


def _tree(root: epath.Path) -> list[tuple[str, epath.Path]]:
    return [(str(p.relative_to(root)), p) for p in files_under(root)]


def shared(settings: dict, train_text: epath.Path, task_dirs: dict[str, epath.Path]) -> dict:
    """What every run of a workdir shares, as digests: its `settings` (the scale's fields that
    no run directory names, the suite's version), the pretraining text and every downstream
    task's files (`task_dirs`, kind -> directory: the built-in suite's and --task dirs)."""
    from bert_jax.ablations import suite

    task_files = [(f"{kind}/{name}", p) for kind, root in task_dirs.items()
                  for name, p in _tree(root)]  # fmt: skip
    # Where the corpus and --task data lie differs between machines; their contents are in the
    # text and suite digests.
    settings = {k: v for k, v in settings.items() if k not in ("corpus", "tasks")}
    settings_text = json.dumps(settings, sort_keys=True).encode()
    return {
        "suite_version": suite.VERSION,
        "settings_sha256": hashlib.sha256(settings_text).hexdigest(),
        "text_sha256": hashlib.sha256(train_text.read_bytes()).hexdigest(),
        "suite_sha256": digest_files(task_files),
    }


def made_by(run_dirs: Iterable[epath.Path]) -> list[str]:
    """Each run's "COMMIT on DEVICE" (of its last attempt), from its run time record (runs record
    theirs since 2026-11-29: earlier ones give "not recorded"); runs never timed add nothing."""
    seen = set()
    for run in run_dirs:
        record = run / "run_time.json"
        if record.exists():
            r = json.loads(record.read_text())
            seen.add(f"{r['commit']} on {r['device']}" if "commit" in r else "not recorded")
    return sorted(seen)


def of_table(scale: Scale, digests: dict, run_dirs: Iterable[epath.Path]) -> dict:
    """A table document's provenance: the commit and device that rendered it, the scale's
    budget, what its runs share (`digests`, from `shared`) and which commits on which devices
    made them."""
    return {
        "rendered_by": f"{commit()} on {device()}", "scale": scale.name, "model": scale.model,
        "steps": scale.steps, "pretrain_seeds": scale.pretrain_seeds, "seeds": scale.seeds,
        **digests, "made_by": made_by(run_dirs),
    }  # fmt: skip
