"""Does BERT pretraining fit? The README's TPU table, compiled ahead of time on this machine.

  python experiments/tpu_table.py [--out experiments/tpu_table.md] [--only v4-32]

For each setup (the paper's: BERT-base 256 x 128 tokens on 16 TPU v3 chips, BERT-large on 64,
phase 2 at 512 tokens; modern slices v4-32, v5e-256, v5p-64, v6e-256 with BERT-large phase 1)
it compiles the `bert-jax pretrain` step from experiments/configs/pretrain*.py for the slice's
compile-only devices (libtpu, no TPU needed), reads memory per device, and searches the largest
power-of-two global batch that fits: a linear estimate from the first compile, then compiles
until batch B fits and 2B does not. Every number in the table comes from a compile; nothing is
extrapolated. A compile of BERT-large takes minutes on a laptop-class CPU; results are cached
in --cache so an interrupted run continues where it stopped.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GiB = 1024**3
# (setup, config file, preset, accelerator type)
SETUPS = [
    ("paper: BERT-base phase 1", "pretrain.py", "base", "v3-32"),
    ("paper: BERT-base phase 2", "pretrain_phase2.py", "base", "v3-32"),
    ("paper: BERT-large phase 1", "pretrain.py", "large", "v3-128"),
    ("paper: BERT-large phase 2", "pretrain_phase2.py", "large", "v3-128"),
    ("BERT-large phase 1", "pretrain.py", "large", "v4-32"),
    ("BERT-large phase 1", "pretrain.py", "large", "v5e-256"),
    ("BERT-large phase 1", "pretrain.py", "large", "v5p-64"),
    ("BERT-large phase 1", "pretrain.py", "large", "v6e-256"),
]
MAX_BATCH = 1 << 17
CACHE_PATH = pathlib.Path("/tmp/bert_jax_tpu_table.json")


def load_config(file: str, preset: str):
    spec = importlib.util.spec_from_file_location("cfg", REPO / "experiments" / "configs" / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    c = module.get_config(preset)
    c.scan_layers = True  # same memory plan per layer, and a much faster compile
    return c


def measure(cache: dict, key: str, file: str, preset: str, tpu, batch: int) -> dict:
    """Compile at global `batch`; {'fits', 'peak', 'args', 'temp', 'required'} in bytes."""
    k = f"{key}|{batch}"
    if k in cache:
        return cache[k]
    from bert_jax.aot.pretraining import compile_pretraining
    from bert_jax.atomic_write import write_json_atomic

    c = load_config(file, preset)
    c.global_batch_size = batch
    t = time.time()
    report, _ = compile_pretraining(c, tpu)
    m = report.memory
    row = {
        "fits": report.fits,
        "peak": m.peak_bytes if m else None,
        "args": m.argument_bytes if m else None,
        "temp": m.temp_bytes if m else None,
        "required": report.required_bytes,
        "seconds": round(time.time() - t, 1),
    }
    print(f"  {key} batch {batch}: {row}", file=sys.stderr, flush=True)
    cache[k] = row
    write_json_atomic(CACHE_PATH, cache, indent=1)
    return row


def largest_fitting(cache, key, file, preset, tpu, b0: int, r0: dict, min_b: int) -> int | None:
    """Largest power-of-two global batch that fits, verified by compiles at B and 2B."""
    fits, no = set(), set()
    (fits if r0["fits"] else no).add(b0)
    if r0["fits"]:  # linear estimate: activations (temporaries) scale with the batch
        room = tpu.hbm_per_device - (r0["peak"] - r0["temp"])
        guess = b0 * room / max(r0["temp"], 1)
    else:
        guess = b0 * 0.8 * tpu.hbm_per_device / max(r0["required"] or 4 * tpu.hbm_per_device, 1)
    b = max(min_b, 1 << max(0, int(math.floor(math.log2(max(guess, 1))))))
    while True:
        lo = max(fits, default=None)
        hi = min(no, default=None)
        if lo is not None and (hi == 2 * lo or lo >= MAX_BATCH):
            return lo
        if lo is None and hi is not None and hi <= min_b:
            return None
        if b in fits or b in no or b < min_b:
            b = 2 * lo if lo is not None else hi // 2
        r = measure(cache, key, file, preset, tpu, b)
        (fits if r["fits"] else no).add(b)
        b = 2 * b if r["fits"] else b // 2


def row_for(cache, setup, file, preset, acc) -> dict:
    from bert_jax.aot.topology import resolve_slice

    tpu = resolve_slice(acc)
    c = load_config(file, preset)
    key = f"{file}:{preset}@{tpu.topology}"
    b0 = int(c.global_batch_size)
    min_b = tpu.num_devices  # default mesh: fsdp over every device, batch split over all
    r0 = measure(cache, key, file, preset, tpu, b0)
    best = largest_fitting(cache, key, file, preset, tpu, b0, r0, min_b)
    rb = cache[f"{key}|{best}"] if best else None
    return {
        "setup": setup,
        "slice": f"{tpu.accelerator_type} ({tpu.chips} chips, {tpu.num_devices} devices)",
        "tokens": f"{b0} x {c.max_seq_length}",
        "per_device": b0 / tpu.num_devices,
        "hbm": tpu.hbm_per_device,
        "r0": r0,
        "best": best,
        "rb": rb,
        "v3": tpu.generation.name == "v3",
    }


def gib(x) -> str:
    return "-" if x is None else f"{x / GiB:.1f}"


def render(rows: list[dict]) -> str:
    from importlib.metadata import version

    import jax

    lines = [
        "| setup | slice | batch x tokens | sequences per device | memory per device, GiB (HBM) "
        "| fits | largest global batch that fits (memory, GiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mem = r["r0"]["peak"] if r["r0"]["fits"] else r["r0"]["required"]
        need = gib(mem) if r["r0"]["fits"] else f"> {gib(r['hbm'])} (XLA: {gib(mem)} temporaries)"
        note = " per core" if r["v3"] else ""
        best = "none" if r["best"] is None else f"{r['best']} ({gib(r['rb']['peak'])})"
        lines.append(
            f"| {r['setup']} | {r['slice']} | {r['tokens']} | {r['per_device']:g} | "
            f"{need} ({gib(r['hbm'])}{note}) | "
            f"{'yes' if r['r0']['fits'] else 'no'} | {best} |"
        )
    date = datetime.date.today().isoformat()
    foot = (
        f"\nGenerated by `python experiments/tpu_table.py` on {date} (jax {jax.__version__}, "
        f"libtpu {version('libtpu')}): the `bert-jax pretrain` step of experiments/configs/"
        "pretrain.py / pretrain_phase2.py (bfloat16 compute, float32 parameters and AdamW state, "
        "mesh fsdp = all devices, remat none, scan_layers=True), compiled by XLA for the slice's "
        "compile-only devices. Memory = arguments + non-donated outputs + temporaries + program "
        "per device; 'largest' is a power of two that compiled within HBM while twice it did "
        "not. v3 has two devices (cores, 16 GiB each) per chip. Check one setup yourself: "
        "`bert-jax compile --config experiments/configs/pretrain.py:large --topology v4-32`."
    )
    return "\n".join(lines) + "\n" + foot + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(REPO / "experiments" / "tpu_table.md"))
    p.add_argument("--cache", default="/tmp/bert_jax_tpu_table.json")
    p.add_argument("--only", default=None, help="one accelerator type, e.g. v4-32")
    args = p.parse_args()
    global CACHE_PATH
    CACHE_PATH = pathlib.Path(args.cache)
    cache = json.loads(CACHE_PATH.read_text()) if CACHE_PATH.exists() else {}
    rows = [row_for(cache, *s) for s in SETUPS if not args.only or s[3] == args.only]
    out = pathlib.Path(args.out)
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text(render(rows))
    tmp.rename(out)
    print(out.read_text())


if __name__ == "__main__":
    main()
