"""The package's import graph: layers import only downwards, and no module circles back.

Every `bert_jax` import counts, at module level or inside a function (a function-level import
would otherwise hide a cycle). Packages of one layer may not import each other."""

from __future__ import annotations

import ast
import pathlib

import pytest

import bert_jax

ROOT = pathlib.Path(bert_jax.__file__).parent

# Lowest first. A module may import its own package and any package of a lower layer.
LAYERS = (
    ("errors", "accelerators", "quiet", "save_noise"),
    ("atomic_write", "config_files", "task_family_key"),
    ("config", "shards", "corpus", "file_set"),
    ("tokenization",),
    ("objectives",),  # reads vocab files through tokenization.vocab
    ("model", "data"),
    ("checkpoint_input", "state_fingerprint"),  # the checkpoint's input item and checksum
    ("checkpoint",),
    ("interop", "input", "decoding"),
    ("train",),
    ("arch",),  # the architecture registry and protocol, and each architecture's family.py
    ("features", "pretraining"),
    ("aot", "configs"),
    ("tasks",),
    ("runs",),
    ("ablations",),
    ("commands", "cli_help"),
    ("cli",),
)
LAYER_OF: dict[str, float] = {unit: i for i, units in enumerate(LAYERS) for unit in units}

# An architecture's folder (bert_jax/arch/<name>/) spans layers: a file's name says which one it
# sits in, just above that layer's shared package (its model below the trainer, its checkpoint
# formats beside interop, its protocol class with the registry). Architectures may import each
# other's files of the same or a lower role (ELECTRA's model is built on BERT's).
ARCH_ROLES = {
    "model": ("__init__", "config", "model", "heads", "layers", "rnn", "scan", "pretraining",
              "variants", "bilstm", "flops"),
    "interop": ("names", "hf_configs", "hf", "tf_ckpt", "tf_variants", "task_heads", "pretrained",
                "checkpoints", "t5_checkpoints", "load", "decoding", "generate_text", "assemble",
                "causal_lm"),
    "arch": ("family",),
    "features": ("features",),
    "pretraining": ("pretraining_task", "train_task"),
    # an architecture's own jobs, which the shared runners in bert_jax.runs choose
    "tasks": ("finetune", "layout", "lm", "ner", "pretrain_run", "text_to_text"),
}  # fmt: skip
ROLE_OF_FILE = {stem: role for role, stems in ARCH_ROLES.items() for stem in stems}
LAYER_OF |= {f"arch.{role}": LAYER_OF[role] + 0.5 for role in ARCH_ROLES if role != "arch"}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    rel = pathlib.Path(*name.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").exists() or (ROOT / rel / "__init__.py").exists()


def _imports(path: pathlib.Path) -> set[str]:
    """bert_jax modules imported anywhere in the file (`from pkg import submodule` -> the
    submodule; `from pkg import name` -> the package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("bert_jax")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith("bert_jax"):
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if _is_module(sub) else node.module)
    return found


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in ROOT.rglob("*.py")}


def _unit(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None
    if parts[1] != "arch" or len(parts) == 2 or not (ROOT / "arch" / parts[2]).is_dir():
        return parts[1]  # the registry, the protocol and the table are the arch layer itself
    role = ROLE_OF_FILE[parts[3] if len(parts) > 3 else "__init__"]
    return "arch" if role == "arch" else f"arch.{role}"


def test_every_unit_has_a_layer():
    units = {_unit(m) for m in _graph() if not _is_arch_file(m)} - {None}
    assert units <= set(LAYER_OF), f"add to LAYERS: {sorted(units - set(LAYER_OF))}"


def _is_arch_file(module: str) -> bool:
    parts = module.split(".")
    return len(parts) > 2 and parts[1] == "arch" and (ROOT / "arch" / parts[2]).is_dir()


def test_every_architecture_file_has_a_role():
    stems = {(m.split(".") + ["__init__"])[3] for m in _graph() if _is_arch_file(m)}
    assert stems <= set(ROLE_OF_FILE), f"add to ARCH_ROLES: {sorted(stems - set(ROLE_OF_FILE))}"


def test_imports_only_go_down():
    wrong = []
    for module, imported in _graph().items():
        unit = _unit(module)
        if unit is None:
            continue
        for target in imported:
            other = _unit(target)
            if other is None or other == unit:
                continue
            if LAYER_OF[other] >= LAYER_OF[unit]:
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports that go up or sideways:\n" + "\n".join(sorted(wrong))


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt == node or nxt not in graph:
                continue
            # A package's __init__ importing its own submodules is how packages are built.
            if nxt.startswith(node + ".") and (ROOT.parent / node.replace(".", "/")).is_dir():
                continue
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_the_data_pipeline_imports_no_jax():
    """create-pretraining-data (and Beam workers) run without the accelerator stack."""
    import subprocess
    import sys

    code = (
        "import sys, bert_jax.data.pipeline, bert_jax.objectives, bert_jax.shards.tfrecord; "
        "print(sorted(m for m in ('jax', 'flax', 'optax', 'orbax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
