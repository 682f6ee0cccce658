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
import warnings

# The OS errors a checkpoint save fails with (bert_jax.checkpoint names them in its one line).
_OS_ERRORS = ("No space left on device", "Disk quota exceeded", "Read-only file system")


class _OrbaxErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        return not ("/orbax/" in record.pathname or _failed_save_future(record))


_UNRETRIEVED = ("Future exception was never retrieved", "Task exception was never retrieved")


def _failed_save_future(record: logging.LogRecord) -> bool:
    """asyncio's "Future (or Task) exception was never retrieved", once per write of the failed
    save (a dozen 2,000-character lines for a full disk): named by the save's tmp dir or its OS
    error."""
    if record.name != "asyncio" or not any(m in str(record.msg) for m in _UNRETRIEVED):
        return False
    text = record.getMessage()
    return "orbax-checkpoint-tmp" in text or any(m in text for m in _OS_ERRORS)


def _is_closed_loop(exc: BaseException | None) -> bool:
    return isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed"


def install() -> None:
    # The writes of a failed save that never ran, reported at exit (with a second line about
    # tracemalloc) after the run's own error.
    warnings.filterwarnings("ignore", message=r"coroutine 'async_serialize\S*' was never awaited",
                            category=RuntimeWarning)  # fmt: skip
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
