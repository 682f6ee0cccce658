"""Runs of one program share their jitted functions within a process.

    with shared_steps():          # a sweep: seeds, rates, lengths, arms of one shape
        for seed in seeds:
            train(config_with(seed), task, workdir_of(seed))

`jax.jit` keeps what it traced and lowered per jitted function, and every run builds its own
trainer, so without this each run of a sweep traces and lowers its train, eval, predict and init
functions again (on a tiny CPU model that is most of a fine-tuning run; the persistent compile
cache only spares XLA's compile). Inside `shared_steps()`, `build_trainer` looks for an earlier
trainer whose program is the same and reuses its jitted functions: the same task (equal by value,
type included), mesh and training settings, where the settings that only feed the step's
inputs or the loop (seed, learning rate and schedule lengths, which reach the step as its
numbers, and the logging, checkpointing and evaluation intervals) are left out of the
comparison. A task that cannot be compared by value (it holds arrays, e.g. a teacher's weights)
is never shared.

It is scoped, not global, because the functions are traced once: a module-level function
swapped between two runs (a test's monkeypatch) would not be seen by the second run.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

_shared: list[tuple[tuple, Any]] | None = None  # (key, trainer), most recent last
_CAPACITY = 16

# Fields of TrainSettings that reach the step only as its numbers (the schedule's values) or are
# read by the loop alone; whether there are warmup steps at all changes the schedule's program.
_NOT_IN_PROGRAM = dict(
    seed=0,
    learning_rate=0.0,
    train_steps=0,
    log_every_steps=0,
    eval_every_steps=0,
    checkpoint_every_steps=0,
    keep_checkpoints=0,
    keep_checkpoint_every_steps=0,
    async_checkpoints=False,
    max_nonfinite_steps=0,
    distributed=False,
)


@contextlib.contextmanager
def shared_steps() -> Iterator[None]:
    """Share jitted functions between the trainers built inside (nested: the outer scope's)."""
    global _shared
    if _shared is not None:
        yield
        return
    _shared = []
    try:
        yield
    finally:
        _shared = None


def program_key(settings: Any, task: Any, mesh: Any, numbers: Mapping[str, float]) -> tuple:
    """What a trainer's jitted functions are traced from, less what only feeds their inputs."""
    program = dataclasses.replace(
        settings, **_NOT_IN_PROGRAM, warmup_steps=int(settings.warmup_steps > 0)
    )
    return (type(task), task, mesh, program, tuple(sorted(numbers)))


def _same(a: tuple, b: tuple) -> bool:
    if a[0] is not b[0]:
        return False
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays among the task's fields: not comparable by value
        return False


def find(key: tuple) -> Any:
    """An earlier trainer built for the same program, or None (also outside `shared_steps`)."""
    if _shared is None:
        return None
    for i, (k, trainer) in enumerate(_shared):
        if _same(k, key):
            _shared.append(_shared.pop(i))
            return trainer
    return None


def keep(key: tuple, trainer: Any) -> None:
    """Remember `trainer` for later runs of its program (the oldest beyond _CAPACITY go)."""
    if _shared is None:
        return
    _shared.append((key, trainer))
    del _shared[:-_CAPACITY]
