"""The fine-tuning config's task family key and its history, read by every layer that meets a
saved run config (interop's task heads, the XLNet exporter, distillation teachers, export) or a
user's config (validation, the CLI's flag errors).

`task_family` (glue | squad | ner | swag) was `family` before; `family` now means only the
pretraining model family.
"""

from __future__ import annotations

from typing import Any

TASK_FAMILIES = ("glue", "squad", "ner", "swag")

# Fine-tuning keys that were renamed (old -> new). A config that still sets an old one (a user's
# own config file, `--config.family=glue`) is refused naming the new key, never silently ignored.
RENAMED_KEYS = {"family": "task_family"}


def renamed_key_message(old: str, where: str = "") -> str:
    """The one line that refuses the renamed fine-tuning key `old` (`where`: how it was given,
    e.g. the flag "--config.family"; default "config family")."""
    new = RENAMED_KEYS[old]
    values = f" ({', '.join(TASK_FAMILIES)})" if new == "task_family" else ""
    return f"{where or f'config {old}'}: renamed {new}{values}"


def saved_task_family(run: Any) -> str | None:
    """The task family of a saved run config (a workdir's config.json): its "task_family", or the
    "family" that fine-tuning runs wrote before the rename (a pretraining run's "family" is its
    model family, not a task family: None)."""
    if run.get("task_family"):
        return run["task_family"]
    old = run.get("family")
    return old if old in TASK_FAMILIES else None
