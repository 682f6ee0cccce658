"""The paper's ablation tables, one module each, and the registry that everything else reads:
the runner and the TPU plan (arms), the report (title, paper numbers, plot), the claims and the
CLI (`--table`'s values and help) ask a table for what they need instead of naming it.

    table = tables.get("5")          # a Table (tables/base.py)
    table.arms(scale), table.title, table.paper_number(arm, task), table.claims(doc)

Adding a table is one new module declaring `TABLE` plus its line in `_TABLES`.
"""

from __future__ import annotations

import dataclasses

from bert_jax.ablations.tables import calibration, electra, fig5, nsp_sop, table5, table6, table8
from bert_jax.ablations.tables.base import INTRINSIC, Arm, Pretrain, Table
from bert_jax.errors import BertJaxError

# The order of `--table`'s values and of `bert-jax ablate --help`.
_TABLES = (table5.TABLE, table6.TABLE, table8.TABLE, fig5.TABLE, nsp_sop.TABLE, electra.TABLE,
           calibration.TABLE)  # fmt: skip
_BY_NAME = {t.name: t for t in _TABLES}

__all__ = ["INTRINSIC", "Arm", "Pretrain", "Table", "get", "names", "select_tasks"]


def names() -> list[str]:
    """Every table's name, as `--table` takes it."""
    return list(_BY_NAME)


def get(name: str) -> Table:
    """The table called `name`; a ValueError naming the others if there is none."""
    if name not in _BY_NAME:
        raise ValueError(f"table {name!r}: use one of {', '.join(_BY_NAME)}")
    return _BY_NAME[name]


def select_tasks(table: str, arms: list[Arm], only: tuple[str, ...]) -> tuple[list[Arm], list[str]]:
    """The arms restricted to the tasks in `only` (arms left with none are dropped), and the
    table's tasks left out; `only` empty: every arm and task."""
    every = list(dict.fromkeys(t for arm in arms for t in arm.tasks))
    if not only:
        return arms, []
    if unknown := [t for t in only if t not in every]:
        raise BertJaxError(f"--only_tasks: table {table} has no task {', '.join(unknown)} "
                           f"(its tasks: {', '.join(every)})")  # fmt: skip
    kept = [dataclasses.replace(a, tasks=tuple(t for t in a.tasks if t in only)) for a in arms]
    return [a for a in kept if a.tasks], [t for t in every if t not in only]
