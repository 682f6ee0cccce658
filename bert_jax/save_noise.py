"""Keep a failed asynchronous checkpoint save to the one line bert-jax prints for it.

When an Orbax save fails in its background threads (a full disk, a lost bucket), Orbax logs the
error with its traceback from each thread involved, and TensorStore callbacks that complete after
Orbax closed its event loop print `RuntimeError: Event loop is closed` tracebacks, hundreds of
them (1,100 lines measured for one full disk). `bert_jax.checkpoint.Checkpointer` turns the
failure into one BertJaxError naming the step and the intact checkpoints; the CLI installs these
filters unless --verbose, so that line is what the user reads.
"""

from __future__ import annotations

import logging
import sys


class _OrbaxErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno >= logging.ERROR and "/orbax/" in record.pathname)


def _is_closed_loop(exc: BaseException | None) -> bool:
    return isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed"


def install() -> None:
    logging.getLogger("absl").addFilter(_OrbaxErrors())
    for handler in logging.getLogger().handlers:
        handler.addFilter(_OrbaxErrors())
    previous = sys.excepthook

    def excepthook(exc_type, exc, tb) -> None:
        if not _is_closed_loop(exc):
            previous(exc_type, exc, tb)

    sys.excepthook = excepthook
    previous_unraisable = sys.unraisablehook

    def unraisablehook(unraisable) -> None:
        if not _is_closed_loop(unraisable.exc_value):
            previous_unraisable(unraisable)

    sys.unraisablehook = unraisablehook
