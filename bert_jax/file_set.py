"""Publish several files into one directory as a set: a reader sees the whole old set or the whole
new set, never a mix, however the writer dies.

A local directory cannot swap several files in one system call, so the set is committed by a
journal (write-ahead): every new file is written complete under a hidden staging name, then one
small journal file listing the renames is written atomically (that write is the commit), then the
renames run and the journal is deleted. A writer killed before the journal leaves only staging
files (removed by `recover`); one killed after it leaves a journal that
`finish_publish` completes. Every loader of a published file calls `finish_publish` on its
directory first, so a reader never acts on a half-renamed set.

Cloud Storage has no rename (it is a copy and a delete), so on gs:// each object is uploaded
whole, in the given order; put the file that records the set last.
"""

from __future__ import annotations

import json
import os

from etils import epath

from bert_jax.atomic_write import is_local, write_bytes_atomic
from bert_jax.errors import BertJaxError

JOURNAL = ".publish-journal.json"


def _staging_name(name: str) -> str:
    return f".{name}.staged-{os.getpid()}"


def publish(directory: str | os.PathLike, files: dict[str, bytes]) -> None:
    """Write `files` (name -> content, in order) into `directory` as one set."""
    out = epath.Path(directory)
    if not is_local(out):
        for name, data in files.items():
            write_bytes_atomic(out / name, data)
        return
    finish_publish(out)  # an earlier interrupted set goes in first; this one then replaces it
    renames = []
    try:
        for name, data in files.items():
            staged = out / _staging_name(name)
            staged.write_bytes(data)
            renames.append([staged.name, name])
        write_bytes_atomic(out / JOURNAL, json.dumps(renames).encode())  # the commit point
    except BaseException as e:  # staged files of an uncommitted set are not left behind
        for staged, _ in renames:
            (out / staged).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise BertJaxError(f"{out}: cannot write {', '.join(files)}: {e.strerror or e}") from e
        raise
    finish_publish(out)


def finish_publish(directory: str | os.PathLike) -> bool:
    """Complete the renames of a committed set whose writer was killed; True if there was one.
    Cheap when there is nothing to do (one stat), so every loader calls it."""
    out = epath.Path(directory)
    if not is_local(out):
        return False
    journal = out / JOURNAL
    try:
        renames = json.loads(journal.read_bytes())
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as e:
        raise BertJaxError(f"{journal}: unreadable publish journal ({e})") from None
    try:
        for staged, name in renames:
            src = out / staged
            if src.exists():  # renamed already by the killed writer or another reader
                src.replace(out / name)
        journal.unlink(missing_ok=True)
    except OSError as e:
        raise BertJaxError(
            f"{out}: an interrupted write left a new file set half in place and it cannot be "
            f"completed here ({e.strerror or e}); rerun the command that wrote it"
        ) from e
    return True


def recover(directory: str | os.PathLike, names: tuple[str, ...]) -> None:
    """Before a writer starts: complete the set a killed writer had committed, and remove the
    staging files of `names` that one killed before its commit point left."""
    out = epath.Path(directory)
    if not is_local(out):
        return
    finish_publish(out)
    for name in names:
        for stale in out.glob(f".{name}.staged-*"):
            stale.unlink(missing_ok=True)
