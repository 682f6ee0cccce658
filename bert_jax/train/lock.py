"""One run per workdir: a second `train()` on a workdir in use is refused with one line instead of
two runs interleaving checkpoints and metrics.

    with WorkdirLock(workdir):      # raises BertJaxError if another run holds it
        ...

Local paths: `fcntl.flock` on `<workdir>/.lock`; the kernel drops it when the holder exits or is
killed, so a crashed run never leaves a stale lock. Other paths (gs:// through etils.epath, which
has no exclusive create): a lease object `<workdir>/.lock.json` naming its owner, renewed by a
background thread every `renew_seconds` and treated as abandoned when not renewed for
`stale_seconds`, or at once when its owner was a process on this host that no longer exists.
Two runs starting within the same instant are told apart by writing the lease,
waiting `settle_seconds` and reading it back: the run whose id is not there gives way. Only JAX
process 0 takes the lock (the processes of one multi-host run share the workdir).

A job that trains and then predicts, writes results and records its time (`bert-jax ablate`'s
runs) holds the lock around all of it, `WorkdirLock(workdir, outer=True)`, so that no second
sweep takes the run for unfinished between the end of training and the results: the training
loop's own lock on that workdir, taken again by the same thread inside it, passes through.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from typing import Any

import jax
from etils import epath

from bert_jax.atomic_write import is_local, write_text_atomic
from bert_jax.errors import BertJaxError


def in_use(workdir: Any, holder: str) -> str:
    return f"{workdir}: in use by another run ({holder})"


class WorkdirInUse(BertJaxError):
    """Another live run holds the workdir: a caller with other work (`bert-jax ablate`) can come
    back to it later. `reason` is the message without the advice."""

    def __init__(self, workdir: Any, holder: str) -> None:
        self.reason = in_use(workdir, holder)
        super().__init__(f"{self.reason}; wait for it to finish or give another --workdir")


def _owner() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}


def _describe(owner: dict[str, Any]) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner.get("started", 0)))
    return f"pid {owner.get('pid')} on {owner.get('host')}, started {started}"


def _dead_on_this_host(owner: dict[str, Any]) -> bool:
    """A lease left by a killed run on this machine (the rerun after a SIGKILL or an OOM kill)
    need not wait out `stale_seconds`."""
    if owner.get("host") != socket.gethostname() or not isinstance(owner.get("pid"), int):
        return False
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


# Workdirs held by an outer lock, by (thread, workdir): the same thread's locks inside it pass.
_OUTER: set[tuple[int, str]] = set()


class WorkdirLock:
    def __init__(
        self,
        workdir: str | os.PathLike,
        *,
        outer: bool = False,
        lease: bool | None = None,
        stale_seconds: float = 300.0,
        renew_seconds: float = 60.0,
        settle_seconds: float = 2.0,
    ) -> None:
        self.workdir = epath.Path(workdir)
        self.outer = outer
        self.lease = (not is_local(workdir)) if lease is None else lease
        self.stale_seconds = stale_seconds
        self.renew_seconds = renew_seconds
        self.settle_seconds = settle_seconds
        self._fd: int | None = None
        self._id = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._passed = False  # acquired inside this thread's outer lock: nothing taken

    def _refuse(self, owner: dict[str, Any]) -> WorkdirInUse:
        return WorkdirInUse(self.workdir, _describe(owner))

    # ---- local: flock --------------------------------------------------------------------------
    def _acquire_flock(self) -> None:
        import fcntl

        path = os.fspath(self.workdir / ".lock")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise BertJaxError(f"{path}: cannot write in the workdir: {e.strerror or e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                owner = json.loads(os.pread(fd, 4096, 0) or b"{}")
            except json.JSONDecodeError:
                owner = {}
            os.close(fd)
            raise self._refuse(owner) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(_owner()).encode(), 0)
        self._fd = fd

    # ---- elsewhere (gs://): a renewed lease -----------------------------------------------------
    def _lease_path(self) -> epath.Path:
        return self.workdir / ".lock.json"

    def _read_lease(self) -> dict[str, Any] | None:
        path = self._lease_path()
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def _write_lease(self) -> None:
        # Whole or not at all: a reader that met a half-written lease would take it as none.
        record = {**_owner(), "id": self._id, "renewed": time.time()}
        write_text_atomic(self._lease_path(), json.dumps(record))

    def _acquire_lease(self) -> None:
        held = self._read_lease()
        fresh = held and time.time() - held.get("renewed", 0) < self.stale_seconds
        if fresh and not _dead_on_this_host(held):
            raise self._refuse(held)
        self._write_lease()
        time.sleep(self.settle_seconds)  # a run that wrote at the same time overwrote ours or not
        held = self._read_lease()
        if not held or held.get("id") != self._id:
            raise self._refuse(held or {})
        self._thread = threading.Thread(target=self._renew, daemon=True, name="workdir-lease")
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.renew_seconds):
            with contextlib.suppress(Exception):  # a missed renewal is retried next period
                held = self._read_lease()
                if held and held.get("id") != self._id:
                    return  # taken over after we went stale: never overwrite another's lease
                self._write_lease()

    # ---- both ------------------------------------------------------------------------------------
    def holder(self) -> str | None:
        """Who holds this workdir now ("pid N on HOST, started T"), or None if it is free; takes
        nothing, so a caller with other work can skip a busy workdir without trying it."""
        if self.lease:
            held = self._read_lease()
            fresh = held and time.time() - held.get("renewed", 0) < self.stale_seconds
            return _describe(held) if fresh and not _dead_on_this_host(held) else None
        import fcntl

        try:
            fd = os.open(os.fspath(self.workdir / ".lock"), os.O_RDONLY)
        except OSError:
            return None  # never locked (or not readable: let acquire() say why)
        try:
            try:  # shared: two lookers never see each other as the holder
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    return _describe(json.loads(os.pread(fd, 4096, 0) or b"{}"))
                except json.JSONDecodeError:
                    return _describe({})
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def _key(self) -> tuple[int, str]:
        path = os.fspath(self.workdir)
        return threading.get_ident(), os.path.realpath(path) if is_local(path) else path

    def acquire(self) -> WorkdirLock:
        if jax.process_index() != 0:
            return self
        if not self.outer and self._key() in _OUTER:
            self._passed = True
            return self
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BertJaxError(f"{self.workdir}: cannot create workdir: {e.strerror or e}") from e
        if self.lease:
            self._acquire_lease()
        else:
            self._acquire_flock()
        if self.outer:
            _OUTER.add(self._key())
        return self

    def release(self) -> None:
        if self._passed:
            self._passed = False
            return
        if self.outer:
            _OUTER.discard(self._key())
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            with contextlib.suppress(Exception):
                held = self._read_lease()
                if held and held.get("id") == self._id:
                    self._lease_path().unlink()

    def __enter__(self) -> WorkdirLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
