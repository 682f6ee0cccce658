"""What a table's runs cost: each pretraining and fine-tuning run adds its wall seconds to
`RUN/run_time.json` when an attempt finishes, so a table continued over several invocations
(or after a crash) still adds up to what its runs took. An attempt that is killed loses its
seconds (the steps it checkpointed are kept). The table's JSON `compute` sums them per part:

    {"pretraining_h": 2.41, "choosing_h": 0.62, "finetuning_h": 1.38, "runs": 171,
     "untimed_runs": 0}

Runs are counted once however many arms share them (Table 5's "+ BiLSTM" shares LTR's
pretraining), each at the seconds of its own process: two sweeps side by side on two cores
add up to about twice the wall time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from etils import epath

from bert_jax.atomic_write import write_json_atomic

FILE = "run_time.json"
PARTS = ("pretraining", "choosing", "finetuning")

T = TypeVar("T")


def _record(run_dir: epath.Path) -> dict | None:
    path = run_dir / FILE
    return json.loads(path.read_text()) if path.exists() else None


def seconds(run_dir: epath.Path) -> float | None:
    """The seconds recorded for a run directory; None when none were (a run made before run
    times were recorded)."""
    record = _record(run_dir)
    return None if record is None else float(record["seconds"])


def timed(run_dir: epath.Path, attempt: Callable[[], T]) -> T:
    """Runs `attempt` and adds its wall seconds to `run_dir`'s record."""
    start = time.monotonic()
    result = attempt()
    took = time.monotonic() - start
    record = _record(run_dir) or {"seconds": 0.0, "attempts": 0}
    record = {"seconds": round(record["seconds"] + took, 1), "attempts": record["attempts"] + 1}
    write_json_atomic(run_dir / FILE, record)
    return result


def spent(runs: Iterable[tuple[str, epath.Path]]) -> dict:
    """Hours per part over (part, run directory) pairs, each directory counted once."""
    hours = dict.fromkeys(PARTS, 0.0)
    seen: set[str] = set()
    untimed = 0
    for part, run_dir in runs:
        if str(run_dir) in seen:
            continue
        seen.add(str(run_dir))
        took = seconds(run_dir)
        if took is None:
            untimed += 1
        else:
            hours[part] += took / 3600
    out = {f"{part}_h": round(h, 3) for part, h in hours.items()}
    return {**out, "runs": len(seen), "untimed_runs": untimed}
