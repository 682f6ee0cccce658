"""`--config` values found by name: a path that exists is used as given; otherwise its file name
(`pretrain_cpu.py`, `pretrain_cpu`, or an `experiments/configs/...` path typed in another
directory) is looked up among the configs installed with the package (bert_jax/configs/) and, in a
source checkout, experiments/configs/. So `--config=pretrain_cpu.py` works from any directory.
"""

from __future__ import annotations

import pathlib

from bert_jax.errors import BertJaxError

PACKAGE_CONFIGS = pathlib.Path(__file__).parent / "configs"
# A source checkout's experiments/configs may hold configs not (yet) installed with the package.
SOURCE_CONFIGS = pathlib.Path(__file__).parent.parent / "experiments" / "configs"


def known_configs() -> list[str]:
    names = {p.name for d in (PACKAGE_CONFIGS, SOURCE_CONFIGS) for p in d.glob("[!_]*.py")}
    return sorted(names)


def resolve(value: str) -> str:
    """The `--config` value with its file part replaced by a path that exists."""
    if "://" in value:
        return value  # a remote path: ml_collections reads it as given
    path, sep, arg = value.partition(":")  # ml_collections splits at the first ':' too
    if pathlib.Path(path).is_file():
        return value
    name = pathlib.Path(path).name
    name = name if name.endswith(".py") else f"{name}.py"
    for folder in (PACKAGE_CONFIGS, SOURCE_CONFIGS):
        if (folder / name).is_file():
            return f"{folder / name}{sep}{arg}"
    raise BertJaxError(
        f"--config: {path}: no such file and no config named {name}; by name: "
        + ", ".join(known_configs())
    )


def _config_values(args: list[str]) -> list[tuple[int, str, str]]:
    """(index, prefix, value) of every `--config=X` (prefix "--config=") and `--config X` (the
    value's own argument, prefix "") in `args`, `-config` too; not the `--config.key` overrides."""
    found = []
    for i, arg in enumerate(args):
        for flag in ("--config", "-config"):
            if arg.startswith(flag + "="):
                found.append((i, flag + "=", arg[len(flag) + 1 :]))
            elif arg == flag and i + 1 < len(args):
                found.append((i + 1, "", args[i + 1]))
    return found


def config_value(args: list[str]) -> str | None:
    """The first `--config` value in `args`, as given; None without one."""
    found = _config_values(args)
    return found[0][2] if found else None


def resolve_argv(args: list[str]) -> list[str]:
    """`args` with every `--config=X` / `--config X` resolved (not the `--config.key` overrides)."""
    out = list(args)
    for i, prefix, value in _config_values(args):
        out[i] = f"{prefix}{resolve(value)}"
    return out
