"""Where metrics go: workdir/metrics.jsonl, TensorBoard event files (tensorboardX, no TF), and a
console line. Only JAX process 0 writes. The workdir may be local or gs:// (etils.epath): Cloud
Storage objects cannot be appended to, so there both files are kept in memory and uploaded whole
now and then (`flush_seconds`), at every `flush()` (the loop flushes after each checkpoint) and
at `close()`."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from typing import Any

import jax
from etils import epath

from bert_jax.atomic_write import is_local, write_bytes_atomic, write_text_atomic
from bert_jax.errors import BertJaxError


def _float(v: Any) -> float | int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    f = float(v)
    return f if math.isfinite(f) else str(f)  # type: ignore[return-value]


class _WholeFileWriter:
    """tensorboardX's event-file object for object stores: appends in memory, uploads the whole
    file through epath on flush (what tensorboardX's own gs:// writer does with a second client)."""

    def __init__(self, path: str) -> None:
        self.path = epath.Path(path)
        self.data = bytearray()
        self._uploaded = -1

    def write(self, chunk: bytes) -> None:
        self.data += chunk

    def flush(self) -> None:
        if len(self.data) != self._uploaded:
            write_bytes_atomic(self.path, bytes(self.data))
            self._uploaded = len(self.data)

    def close(self) -> None:
        self.flush()


class _WholeFileWriterFactory:
    def open(self, path: str) -> _WholeFileWriter:
        return _WholeFileWriter(path)

    def directory_check(self, path: str) -> None:
        pass  # object stores have no directories to create


def _summary_writer(logdir: epath.Path):
    from tensorboardX import SummaryWriter, record_writer

    if not is_local(logdir):  # route gs:// (and any other epath scheme) through epath
        scheme = os.fspath(logdir).split("://", 1)[0]
        record_writer.register_writer_factory(scheme, _WholeFileWriterFactory())
    return SummaryWriter(logdir=os.fspath(logdir))


class MetricsWriter:
    """metrics.jsonl (one JSON object per logged step) and TensorBoard scalars. A run that starts
    at `resume_step` (None: step 0) first drops the records of later steps, which it replays."""

    def __init__(
        self,
        workdir: str | os.PathLike,
        resume_step: int | None = None,
        flush_seconds: float = 60.0,
    ) -> None:
        self.enabled = jax.process_index() == 0
        self.path = epath.Path(workdir) / "metrics.jsonl"
        self._append = is_local(self.path)  # else: the whole file is rewritten on flush
        self._lines: list[str] = []
        self._dirty = False
        self._flush_seconds = flush_seconds
        self._last_upload = time.monotonic()
        self._tb = None
        if not self.enabled:
            return
        if self.path.exists():
            self._lines = self._lines_up_to(resume_step or 0)
            write_text_atomic(self.path, "".join(self._lines))
        self._tb = _summary_writer(epath.Path(workdir) / "tensorboard")

    def _lines_up_to(self, step: int) -> list[str]:
        keep = []
        for line in self.path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line + "\n")
            except json.JSONDecodeError:
                continue  # a line cut by a kill
        return keep

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        if not self.enabled:
            return
        record = {"step": int(step), **{k: _float(v) for k, v in metrics.items()}}
        line = json.dumps(record) + "\n"
        if self._append:
            try:
                with self.path.open("a") as f:
                    f.write(line)
            except OSError as e:  # a full disk: one line naming the file
                raise BertJaxError(f"{self.path}: writing metrics failed ({e})") from None
        else:
            self._lines.append(line)
            self._dirty = True
            if time.monotonic() - self._last_upload >= self._flush_seconds:
                self._upload()
        for k, v in record.items():
            if k != "step" and isinstance(v, int | float):
                self._tb.add_scalar(k, v, int(step))

    def _upload(self) -> None:
        if self._dirty:
            write_text_atomic(self.path, "".join(self._lines))
            self._dirty = False
        self._last_upload = time.monotonic()

    def flush(self) -> None:
        if not self.enabled:
            return
        self._upload()
        if self._tb is not None:
            try:
                self._tb.flush()
            except OSError as e:  # a full disk: one line naming the directory
                raise _events_failed(self._tb, e) from None

    def close(self) -> None:
        if not self.enabled:
            return
        tb, self._tb = self._tb, None
        try:
            self._upload()
        finally:
            if tb is not None:
                _close_events(tb)


def _close_events(tb: Any) -> None:
    """tensorboardX's writer closed, once. A close that fails (a full disk) is one line; its
    worker thread is stopped and the writer marked closed (tensorboardX 2.6's own fields), or
    its atexit hook would close it again and print tracebacks after the run's own error."""
    writers = list((tb.all_writers or {}).values())  # close() drops them, raising or not
    try:
        tb.close()
    except OSError as e:
        for writer in writers:
            with contextlib.suppress(Exception):
                writer.event_writer._worker.stop()
            writer.event_writer._closed = True
        raise _events_failed(tb, e) from None


def _events_failed(tb: Any, e: OSError) -> BertJaxError:
    return BertJaxError(f"{tb.logdir}: writing TensorBoard events failed ({e})")


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    return f"{h}:{rem // 60:02d}:{rem % 60:02d}" if h else f"{rem // 60}:{rem % 60:02d}"


class Console:
    """One line per log step; a redrawn progress bar in between when stdout is a terminal."""

    def __init__(self, total_steps: int) -> None:
        self.total = total_steps
        self.enabled = jax.process_index() == 0
        self.interactive = self.enabled and sys.stdout.isatty()

    def log(self, step: int, m: dict[str, Any], eta_seconds: float) -> None:
        if not self.enabled:
            return
        parts = [f"step {step}/{self.total}", f"loss {m['loss']:.4f}"]
        for key, label in (
            ("masked_lm_accuracy", "mlm_acc"),
            ("next_sentence_accuracy", "nsp_acc"),
            ("sentence_order_accuracy", "sop_acc"),
            ("accuracy", "acc"),
        ):
            if key in m:
                parts.append(f"{label} {m[key]:.4f}")
        if "tokens_per_sec" in m:
            parts.append(f"{m['tokens_per_sec']:,.0f} tok/s")
        if "seq_per_sec" in m:
            parts.append(f"{m['seq_per_sec']:,.1f} seq/s")
        if "mfu" in m:
            parts.append(f"MFU {100 * m['mfu']:.1f}%")
        parts.append(f"lr {m.get('learning_rate', 0.0):.2e}")
        parts.append(f"ETA {_duration(eta_seconds)}")
        self._clear()
        print(" | ".join(parts), flush=True)

    def eval(self, step: int, m: dict[str, Any]) -> None:
        if self.enabled:
            self._clear()
            print(f"eval @ {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in m.items()), flush=True)

    def progress(self, step: int) -> None:
        if self.interactive:
            width = 30
            done = int(width * step / max(self.total, 1))
            bar = "#" * done + "-" * (width - done)
            sys.stdout.write(f"\r[{bar}] {step}/{self.total}")
            sys.stdout.flush()

    def _clear(self) -> None:
        if self.interactive:
            sys.stdout.write("\r\033[K")

    def message(self, text: str) -> None:
        if self.enabled:
            self._clear()
            print(text, flush=True)


def now() -> float:
    return time.perf_counter()
