"""Write a whole file or nothing, so an interrupted run never leaves a truncated file that looks
finished. Paths may be local or gs:// (etils.epath). A local file goes to a hidden temporary name
beside the target and is renamed over it once complete; a Cloud Storage object is already
all-or-nothing (an upload only becomes visible when it completes), and a rename there is a copy
and a delete, so it is written in place."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from glob import escape as glob_escape
from typing import IO, Any

from etils import epath

from bert_jax.errors import BertJaxError


def is_local(path: str | os.PathLike) -> bool:
    """False for URLs such as gs://bucket/x (epath's cloud backends), True for file paths."""
    return "://" not in os.fspath(path)


def _remove_stale_temporaries(path: epath.Path) -> None:
    """`.<name>.tmp-<pid>` beside `path` left by a writer that was killed (SIGKILL, OOM) before
    its rename: a rerun of an export would otherwise keep a model-sized hidden file forever. Only
    those of processes that no longer run on this host go; a live writer keeps its own."""
    for tmp in path.parent.glob(f".{glob_escape(path.name)}.tmp-*"):
        pid = tmp.name.rsplit(".tmp-", 1)[1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except (OSError, OverflowError):  # alive (someone else's), or not a pid
            pass


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    path = epath.Path(path)
    try:
        if not is_local(path):
            path.write_bytes(data)
            return
        _remove_stale_temporaries(path)
        tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
        try:
            tmp.write_bytes(data)
            tmp.replace(path)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as e:
        raise BertJaxError(f"{path}: cannot write: {e.strerror or e}") from e


@contextlib.contextmanager
def open_atomic(path: str | os.PathLike, binary: bool = False) -> Iterator[IO]:
    """A file object for writers that stream (text mode: UTF-8, newlines written as given);
    `path` gets the content, whole, only if the block completes. Local: a hidden temporary file
    beside `path`, renamed over it. gs://: a local temporary file, uploaded in one piece at the
    end."""
    path = epath.Path(path)
    if is_local(path):
        if path.parent.is_dir():  # (a missing directory is reported by open() below)
            _remove_stale_temporaries(path)
        staged = path.parent / f".{path.name}.tmp-{os.getpid()}"
    else:
        fd, name = tempfile.mkstemp(prefix="bert-jax-", suffix=f"-{path.name}")
        os.close(fd)
        staged = epath.Path(name)
    text = {} if binary else {"encoding": "utf-8", "newline": "\n"}
    try:
        try:
            f = open(staged, "wb" if binary else "w", **text)  # noqa: SIM115 (closed below)
        except OSError as e:
            raise BertJaxError(f"{path}: cannot write: {e.strerror or e}") from e
        with f:
            yield f
        try:
            if is_local(path):
                os.replace(staged, path)
            else:
                with open(staged, "rb") as src, path.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
        except OSError as e:
            raise BertJaxError(f"{path}: cannot write: {e.strerror or e}") from e
    finally:
        # Not only FileNotFoundError: below a regular file it is NotADirectoryError, which
        # would replace the one-line error above with a traceback.
        with contextlib.suppress(OSError):
            staged.unlink(missing_ok=True)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike, obj: Any, **json_options: Any) -> None:
    """`json_options` go to json.dumps (indent 2 unless given); a newline ends the file."""
    json_options.setdefault("indent", 2)
    write_text_atomic(path, json.dumps(obj, **json_options) + "\n")


def read_json(path: str | os.PathLike, missing: str) -> Any:
    """The parsed JSON file at `path`; one-line errors: `missing` if there is no such file."""
    path = epath.Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise BertJaxError(missing) from None
    except json.JSONDecodeError as e:
        raise BertJaxError(f"{path}: not valid JSON ({e})") from None


def read_json_object(path: str | os.PathLike, missing: str) -> dict[str, Any]:
    """`read_json` of a file that must hold one JSON object (a config.json, a stats.json)."""
    raw = read_json(path, missing)
    if not isinstance(raw, dict):
        raise BertJaxError(f"{path}: expected a JSON object {{...}}, found a {type(raw).__name__}")
    return raw


def check_writable_dir(path: str | os.PathLike, flag: str, *, leave_no_trace: bool = False) -> None:
    """Create `path` (a directory) and write and delete a probe file in it, so an unwritable
    output location fails in one line naming `flag` before any work, not after it. With
    `leave_no_trace` a directory it had to create is removed again (for commands whose writer
    creates its output itself), so a run that then fails leaves no empty output behind."""
    d = epath.Path(path)
    probe = d / f".bert-jax-probe-{os.getpid()}"
    try:
        created = not d.exists()
        d.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
        if leave_no_trace and created and is_local(path):
            d.rmdir()
    except OSError as e:
        raise BertJaxError(f"{flag}={path}: cannot write there: {e.strerror or e}") from e
