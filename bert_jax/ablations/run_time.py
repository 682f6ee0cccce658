"""What a table's runs cost: each pretraining and fine-tuning run adds its wall seconds to
`RUN/run_time.json` when an attempt finishes or is stopped by SIGTERM after saving its step,
so a table continued over several invocations (or after a crash) still adds up to what its runs
took. An attempt that is killed or fails loses its seconds (the steps it checkpointed are
kept). The table's JSON `compute` sums them per part:

    {"pretraining_h": 2.41, "choosing_h": 0.62, "finetuning_h": 1.38, "runs": 171,
     "untimed_runs": 0}

Runs are counted once however many arms share them (Table 5's "+ BiLSTM" shares LTR's
pretraining), each at the seconds of its own process: two sweeps side by side on two cores
add up to about twice the wall time.

A sweep continued on a workdir first says what is left and about how long it takes, from the
finished runs of the same kind (`remaining`, `describe`):

    to do: 9 pretraining runs (about 5.8 h), 12 rate-choice runs (about 0.6 h), 84
    fine-tuning runs (about 4.3 h); about 10.7 h of one process in all ...
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeVar

from etils import epath

from bert_jax.ablations import provenance
from bert_jax.atomic_write import write_json_atomic
from bert_jax.errors import StoppedAndSaved

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
    """Runs `attempt` and adds its wall seconds to `run_dir`'s record, also when it stopped on
    SIGTERM after saving its step: a rerun continues from that step, so those seconds were
    spent on the run (a stopped rate-choice run of an hour lost them before 2026-12-02)."""
    start = time.monotonic()
    try:
        result = attempt()
    except StoppedAndSaved:
        _add(run_dir, time.monotonic() - start)
        raise
    _add(run_dir, time.monotonic() - start)
    return result


def _add(run_dir: epath.Path, took: float) -> None:
    record = _record(run_dir) or {"seconds": 0.0, "attempts": 0}
    record = {"seconds": round(record["seconds"] + took, 1), "attempts": record["attempts"] + 1,
              "commit": provenance.commit(), "device": provenance.device()}  # the last attempt's
    write_json_atomic(run_dir / FILE, record)


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


class Ref(NamedTuple):
    """One run a table's job uses. Runs of one `kind` cost about the same per unit: a
    pretraining step, or a whole fine-tuning run. `units`: what a finished run did, or what an
    unfinished one still needs."""

    part: str  # one of PARTS
    kind: str
    directory: epath.Path | None  # None: a fine-tuning run whose rate is not chosen yet
    done: bool
    units: float = 1.0


def _unit_seconds(ref: Ref) -> float | None:
    """A finished run's seconds per unit. A pretraining run's come from the step rate its log
    shows (a resumed run's record covers its last attempt only); the others' from the record."""
    if ref.part != "pretraining":
        took = seconds(ref.directory)
        return None if took is None else took / ref.units
    config, log = ref.directory / "config.json", ref.directory / "metrics.jsonl"
    if not (config.exists() and log.exists()):
        return None
    batch = json.loads(config.read_text())["global_batch_size"]
    rates = [m["seq_per_sec"] for line in log.read_text().splitlines()
             if "seq_per_sec" in (m := json.loads(line))]  # fmt: skip
    return batch / statistics.median(rates) if rates else None


def remaining(refs: Iterable[Ref]) -> dict[str, dict]:
    """Per part: the unfinished runs, their estimated hours (the median seconds per unit of
    the finished runs of their part and kind, times their units), and how many have no such
    run to go by."""
    per_unit: dict[tuple[str, str], list[float]] = {}
    todo, seen = [], set()
    for ref in refs:
        if ref.directory is not None:  # shared runs count once
            if str(ref.directory) in seen:
                continue
            seen.add(str(ref.directory))
        if not ref.done:
            todo.append(ref)
        elif (cost := _unit_seconds(ref)) is not None:
            per_unit.setdefault((ref.part, ref.kind), []).append(cost)
    out = {part: {"runs": 0, "hours": 0.0, "unknown": 0} for part in PARTS}
    for ref in todo:
        o = out[ref.part]
        o["runs"] += 1
        if (costs := per_unit.get((ref.part, ref.kind))) is not None:
            o["hours"] += statistics.median(costs) * ref.units / 3600
        else:
            o["unknown"] += 1
    return out


def per_unit(units: list[tuple[str, list[str], list[Ref]]], finished: list[Ref]) -> list[dict]:
    """Per (unit key, its arm:seed names, its runs): {"unit", "arms", "left" (`remaining`, by
    the `finished` runs' costs), "shared_with"}. A run several units need (an arm's rate
    choice, made on its seed-0 run) is counted under the first unit that needs it; the others
    name that unit in "shared_with" while the run is unfinished."""
    first: dict[str, str] = {}
    out = []
    for key, names, refs in units:
        own, shared_with = [], set()
        for r in refs:
            owner = first.setdefault(str(r.directory), names[0]) if r.directory else names[0]
            if owner == names[0]:
                own.append(r)
            elif not r.done:
                shared_with.add(owner)
        out.append({"unit": key, "arms": names, "left": remaining([*own, *finished]),
                    "shared_with": sorted(shared_with)})  # fmt: skip
    return out


def _about(hours: float) -> str:
    return f"about {hours:.1f} h" if hours >= 1 else f"about {round(hours * 60)} min"


def describe(left: dict[str, dict]) -> str | None:
    """One line of what `remaining` found; None when nothing is left."""
    said = []
    for part, noun in zip(PARTS, ("pretraining", "rate-choice", "fine-tuning"), strict=True):
        o = left[part]
        if not o["runs"]:
            continue
        known = o["runs"] - o["unknown"]
        how = _about(o["hours"]) if known else "none of their kind finished yet"
        if known and o["unknown"]:
            how += f"; {o['unknown']} with none of their kind finished yet"
        said.append(f"{o['runs']} {noun} run{'s' if o['runs'] > 1 else ''} ({how})")
    if not said:
        return None
    line = f"to do: {', '.join(said)}"
    if all(o["runs"] == o["unknown"] for o in left.values()):
        return line
    total = sum(o["hours"] for o in left.values())
    unknown = sum(o["unknown"] for o in left.values())
    more = f", not counting the {unknown} with none of their kind finished" if unknown else ""
    return (f"{line}; {_about(total)} of one process in all{more}, by this workdir's finished "
            "runs of the same kind")  # fmt: skip
