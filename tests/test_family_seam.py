"""One seam per architecture: outside `bert_jax/arch/` (and the shared model blocks and the
configs) no code branches on a model family. It asks the registry
(`registry.for_objective / for_checkpoint / for_model_config`) and then the family.

A branch is a comparison with a family's name ("xlnet", "electra", model_type "t5", ...), an
`isinstance` test against a family's model or config class, a helper that answers "is this
XLNet?" (`is_xlnet`, `model_kind`, ...), or a guess from head names ("rtd" in heads).
Capabilities a family declares (`padding_side`, `task_kind`, `extracts_features`) are not
branches on its name and are allowed.
"""

from __future__ import annotations

import ast
import pathlib
import re

import bert_jax

ROOT = pathlib.Path(bert_jax.__file__).parent
# config.py is BertConfig, the BERT encoder's own config (its HF dict is BERT's alone).
EXEMPT = ("arch", "model", "configs", "config.py")
FAMILY_NAMES = {
    "bert", "roberta", "albert", "electra", "distilbert", "xlnet", "t5", "seq2seq", "elmo",
}  # fmt: skip
HEAD_GUESSES = {"rtd", "plm"}
CLASS = re.compile(r"^(XLNet|Electra|Seq2Seq|T5|Elmo|ELMo|Roberta|Albert|DistilBert)")
HELPER = re.compile(r"^(is_xlnet|is_electra|is_seq2seq|is_t5|model_kind)")
# Branches left on purpose, each with its reason (path: count).
ALLOWED = {
    # The data pipeline writes an encoder-decoder objective's inputs/targets shards instead of
    # the reference schema. It sits below the families (it imports no JAX), so it asks the
    # objective's type (`objectives.is_seq2seq`, defined by an isinstance).
    "objectives/__init__.py": 1,
    "data/pipeline.py": 1,
    "data/seq2seq_pipeline.py": 1,
    "commands/create_pretraining_data.py": 1,
}


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_strings(e) for e in node.elts)) if node.elts else set()
    return set()


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def branch_lines(path: pathlib.Path) -> list[int]:
    """Line numbers of `path` that branch on a model family."""
    lines = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare) and all(
            isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops
        ):
            found = set().union(*(_strings(n) for n in (node.left, *node.comparators)))
            # `"bert" in record` asks whether a file or a parameter tree has that key (a
            # workdir's model entry, the encoder's scope): reading a format, not a family.
            key_lookup = isinstance(node.ops[0], (ast.In, ast.NotIn)) and _strings(node.left)
            if found & HEAD_GUESSES or (found & FAMILY_NAMES and not key_lookup):
                lines.add(node.lineno)
        elif isinstance(node, ast.Call):
            func = _name(node.func)
            if func == "isinstance" and len(node.args) == 2:
                kinds = node.args[1]
                classes = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
                if any(CLASS.match(_name(c)) for c in classes):
                    lines.add(node.lineno)
            elif HELPER.match(func):
                lines.add(node.lineno)
        elif isinstance(node, ast.Attribute) and HELPER.match(node.attr):
            lines.add(node.lineno)
    return sorted(lines)


def family_branches() -> dict[str, list[int]]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in EXEMPT:
            continue
        found = branch_lines(path)
        if found:
            out[rel.as_posix()] = found
    return out


def test_no_module_outside_the_families_branches_on_one():
    found = family_branches()
    extra = {
        f"{path}: lines {', '.join(map(str, lines))}"
        for path, lines in found.items()
        if len(lines) > ALLOWED.get(path, 0)
    }
    assert not extra, "ask bert_jax.arch.registry instead of branching on a family:\n" + "\n".join(
        sorted(extra)
    )


def test_the_detector_finds_each_kind_of_branch(tmp_path):
    """A detector that finds nothing would pass the test above on any code."""
    code = tmp_path / "probe.py"
    code.write_text(
        "if config.family == 'electra':\n    pass\n"
        "if kind in ('xlnet', 'seq2seq'):\n    pass\n"
        "if isinstance(cfg, XLNetConfig):\n    pass\n"
        "if model_kind(path) == None:\n    pass\n"
        "if 'rtd' in spec.heads:\n    pass\n"
        "if task.is_electra:\n    pass\n"
        "if family.padding_side == 'left' or cfg.task_family == 'glue':\n    pass\n"
    )
    assert branch_lines(code) == [1, 3, 5, 7, 9, 11]
