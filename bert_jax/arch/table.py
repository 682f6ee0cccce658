"""README's "families x commands" table, rendered from the registry: each cell reads a family's
capability (its objectives, `task_kind`, `extracts_features`, `attention_maps`, `generates`,
`distills_students`, `distills_teachers`), and a refusal gives the family's own reason
(`Architecture.refusal`), the words its command prints. Regenerate the README's copy with

    python -m bert_jax.arch.table --write README.md

(tests/test_family_dirs_commands.py, `test_readme_families_table_is_the_registrys`, fails
while the README's table differs from this rendering).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from bert_jax import objectives
from bert_jax.arch.registry import ARCHITECTURES, Architecture
from bert_jax.errors import BertJaxError

BEGIN = "<!-- families-table:begin (python -m bert_jax.arch.table --write README.md) -->"
END = "<!-- families-table:end -->"


def _objectives(family: Architecture) -> list[str]:
    every = [*objectives.names(), *objectives.seq2seq_names()]
    return [name for name in every if objectives.get(name).architecture == family.name]


def _pretrain(family: Architecture) -> tuple[bool, str]:
    names = _objectives(family)
    return bool(names), f"objectives {', '.join(names)}"


def _compile(family: Architecture) -> tuple[bool, str]:
    return bool(_objectives(family)), "its pretraining step, for a TPU slice"


def _finetune(family: Architecture) -> tuple[bool, str]:
    if family.task_kind == "encoder_decoder":
        return True, "text-to-text"
    built = type(family).load_for_finetuning is not Architecture.load_for_finetuning
    return built, "task heads"


def _features(family: Architecture) -> tuple[bool, str]:
    what = "the encoder's" if family.task_kind == "encoder_decoder" else ""
    return family.extracts_features, what and f"{what} hidden states"


def _attention(family: Architecture) -> tuple[bool, str]:
    kinds = family.attention_maps
    return bool(kinds), "" if kinds == ("encoder",) else f"--attention={' | '.join(kinds)}"


def _generate(family: Architecture) -> tuple[bool, str]:
    detail = {"causal": "left-to-right (causal) checkpoints", "seq2seq": ""}
    return bool(family.generates), detail.get(family.generates, family.generates)


# (command, its cell); "convert" reads and writes every family's checkpoints (bert_jax.runs.export).
COMMANDS: tuple[tuple[str, Callable[[Architecture], tuple[bool, str]]], ...] = (
    ("pretrain", _pretrain),
    ("compile", _compile),
    ("finetune", _finetune),
    ("convert", lambda f: (True, "")),
    ("extract-features", _features),
    ("attention-map", _attention),
    ("generate", _generate),
    ("distillation student", lambda f: (f.distills_students, "")),
    ("distillation teacher", lambda f: (f.distills_teachers, "")),
)


def cell(family: Architecture, command: str) -> str:
    """Yes (with what it runs), or no with the family's reason."""
    runs, detail = dict(COMMANDS)[command](family)
    text = (f"yes: {detail}" if detail else "yes") if runs else f"no: {family.refusal(command)}"
    return text.replace("|", "\\|")


def render() -> str:
    """The markdown table, one row per registered family."""
    head = ["family", *(name for name, _ in COMMANDS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family in ARCHITECTURES.values():
        row = [f"`{family.name}` ({family.title})", *(cell(family, c) for c, _ in COMMANDS)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def section(readme_text: str) -> str:
    """The table between README's markers."""
    if BEGIN not in readme_text or END not in readme_text:
        raise BertJaxError(f"README: no families table between {BEGIN!r} and {END!r}")
    return readme_text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def replace_section(readme_text: str) -> str:
    section(readme_text)  # both markers are there
    before, rest = readme_text.split(BEGIN, 1)
    return f"{before}{BEGIN}\n{render()}\n{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="README", help="replace the table in this file")
    args = parser.parse_args(argv)
    if not args.write:
        print(render())
        return
    with open(args.write, encoding="utf-8") as f:
        text = f.read()
    new = replace_section(text)
    with open(args.write, "w", encoding="utf-8") as f:
        f.write(new)
    print(f"{args.write}: families table {'unchanged' if new == text else 'rewritten'}")


if __name__ == "__main__":
    try:
        main()
    except BertJaxError as e:
        sys.exit(f"bert_jax.arch.table: error: {e}")
