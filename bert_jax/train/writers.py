"""Where metrics go: workdir/metrics.jsonl, TensorBoard event files (tensorboardX, no TF), and a
console line. Only JAX process 0 writes."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any

import jax
from etils import epath


def _float(v: Any) -> float | int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    f = float(v)
    return f if math.isfinite(f) else str(f)  # type: ignore[return-value]


class MetricsWriter:
    def __init__(self, workdir: str | os.PathLike, resume_step: int | None = None) -> None:
        self.enabled = jax.process_index() == 0
        self.path = epath.Path(workdir) / "metrics.jsonl"
        self._tb = None
        if not self.enabled:
            return
        if resume_step is not None and self.path.exists():
            self._truncate_after(resume_step)
        from tensorboardX import SummaryWriter

        self._tb = SummaryWriter(logdir=str(epath.Path(workdir) / "tensorboard"))

    def _truncate_after(self, step: int) -> None:
        """A resumed run replays the steps after its checkpoint: drop their old records."""
        keep = []
        for line in self.path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill
        tmp = self.path.parent / (self.path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in keep))
        tmp.replace(self.path)

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        if not self.enabled:
            return
        record = {"step": int(step), **{k: _float(v) for k, v in metrics.items()}}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        for k, v in record.items():
            if k != "step" and isinstance(v, int | float):
                self._tb.add_scalar(k, v, int(step))

    def flush(self) -> None:
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None


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
