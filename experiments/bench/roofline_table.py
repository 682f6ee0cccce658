"""XLA's own accounting of the pretraining step on TPU slices, without a TPU: the README's roofline
table and the HLO census behind it.

  python experiments/bench/roofline_table.py [--out experiments/bench/results/roofline_DATE]
      [--only bert-base] [--slices v4-8,v5e-8] [--set attention_probs_dropout_prob=0.0 ...]

For each setup (BERT-small/base/large at 256 x 128, ModernBERT-base/large packed at 1024 tokens,
T5 v1.1-base span corruption) and slice it compiles the `bert-jax pretrain` step for the slice's
compile-only devices (libtpu), unrolled (scan_layers=False, no gradient accumulation: XLA counts
a loop body once) and with remat none, and prints per device XLA's FLOPs and bytes, the analytic
minimum bytes, their ratio, and the bound the roofline puts on MFU (bert_jax.aot.roofline), and
the same for the bytes the compiled HLO places in HBM (on-chip memory left out). The
HLO census of every compile (bert_jax.aot.hlo_census) goes to OUT/<setup>_<slice>.txt, the table
to OUT/table.md and the numbers to OUT/rows.json. `--set key=value` applies a config change to
every setup, to measure a change against the table before it. Compiles take minutes on a
2-core CPU; a setup already in OUT/rows.json is not compiled again.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

# ModernBERT's rows hold 8 packed instances (no batch-size warmup: the accounting is one step's)
_PACKED = {"pack_sequences": 8, "batch_warmup_start": 0, "batch_warmup_steps": 0}
# (name, config module, preset, global batch, overrides)
SETUPS = [
    ("bert-small", "pretrain", "small", 256, {}),
    ("bert-base", "pretrain", "base", 256, {}),
    ("bert-large", "pretrain", "large", 256, {}),
    ("modernbert-base packed", "modernbert", "base", 64, _PACKED),
    ("modernbert-large packed", "modernbert", "large", 32, _PACKED),
    ("t5-base", "t5", "base", 64, {}),
]  # fmt: skip


def setup_config(module: str, preset: str, batch: int, overrides: dict, extra: dict):
    c = importlib.import_module(f"bert_jax.configs.{module}").get_config(preset)
    c.global_batch_size = batch
    c.scan_layers, c.remat_policy = False, "none"
    if "grad_accum_steps" in c:
        c.grad_accum_steps = 1
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, -1, 1
    if "dynamic_masking" in c:
        c.dynamic_masking = False  # masks drawn on the host: the compiled step is the same
    c.update({k: v for k, v in overrides.items() if k in c})
    c.update(extra)
    return c


def measure(name: str, module: str, preset: str, batch: int, overrides: dict, slice_name: str,
            extra: dict, out: pathlib.Path) -> dict:  # fmt: skip
    from bert_jax.aot.hlo_census import format_census, hlo_census
    from bert_jax.aot.pretraining import compile_pretraining
    from bert_jax.aot.roofline import step_roofline
    from bert_jax.aot.topology import resolve_slice

    c = setup_config(module, preset, batch, overrides, extra)
    tpu = resolve_slice(slice_name)
    start = time.time()
    report, trainer = compile_pretraining(c, tpu)
    seconds = time.time() - start
    row = {"setup": name, "slice": tpu.accelerator_type, "batch": batch,
           "tokens": int(c.max_seq_length), "fits": report.fits,
           "compile_s": round(seconds)}  # fmt: skip
    census = hlo_census(report.compiled.as_text()) if report.compiled is not None else None
    r = step_roofline(report, trainer, tpu, c.dtype, batch, census=census)
    if r is not None:
        row.update(
            xla_flops=r.xla_flops, xla_bytes=r.xla_bytes, model_flops=r.model_flops,
            minimum=r.minimum, minimum_bytes=r.minimum_bytes, ratio=r.bytes_over_minimum,
            mfu_bound=r.mfu_bound, ideal_mfu_bound=r.ideal_mfu_bound,
            hbm_bytes=r.hbm_bytes, hbm_ratio=r.hbm_over_minimum, hbm_mfu_bound=r.hbm_mfu_bound,
        )  # fmt: skip
    if census is not None:
        stem = f"{name.replace(' ', '_')}_{tpu.accelerator_type}"
        (out / f"{stem}.txt").write_text(format_census(census, top=20, label=stem) + "\n")
        row["census"] = [list(c) for c in census.by_category()]
    return row


def render(rows: list[dict], extra: dict) -> str:
    from importlib.metadata import version

    import jax

    lines = [
        "| setup | slice | batch x tokens | XLA FLOPs / device | XLA bytes / device | minimum "
        "bytes | bytes / minimum | MFU bound | HBM bytes / device | HBM / minimum | MFU bound, "
        "HBM only | at the minimum |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "xla_bytes" not in r:
            lines.append(f"| {r['setup']} | {r['slice']} | {r['batch']} x {r['tokens']} | "
                         "(did not fit) | | | | | | | | |")  # fmt: skip
            continue
        ratio = f"{r['ratio']:.1f}x" if r.get("ratio") else "-"
        ideal = f"{100 * r['ideal_mfu_bound']:.0f}%" if r.get("ideal_mfu_bound") else "-"
        low = f"{r['minimum_bytes']:.3g}" if r.get("minimum_bytes") else "-"
        hbm = f"{r['hbm_bytes']:.3g}" if r.get("hbm_bytes") else "-"
        hbm_ratio = f"{r['hbm_ratio']:.1f}x" if r.get("hbm_ratio") else "-"
        hbm_bound = f"{100 * r['hbm_mfu_bound']:.1f}%" if r.get("hbm_mfu_bound") else "-"
        lines.append(
            f"| {r['setup']} | {r['slice']} | {r['batch']} x {r['tokens']} | "
            f"{r['xla_flops']:.3g} | {r['xla_bytes']:.3g} | {low} | {ratio} | "
            f"{100 * r['mfu_bound']:.1f}% | {hbm} | {hbm_ratio} | {hbm_bound} | {ideal} |"
        )
    knobs = " ".join(f"{k}={v}" for k, v in extra.items()) or "none"
    foot = (
        f"\nGenerated by `python experiments/bench/roofline_table.py` on "
        f"{datetime.date.today().isoformat()} (jax {jax.__version__}, libtpu {version('libtpu')}),"
        f" config changes: {knobs}. bfloat16 compute, float32 parameters and AdamW state, fsdp "
        "over all devices, unrolled layers, remat none."
    )
    return "\n".join(lines) + "\n" + foot + "\n"


def _value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    day = datetime.date.today().isoformat()
    ap.add_argument("--out", default=str(REPO / f"experiments/bench/results/roofline_{day}"))
    ap.add_argument("--only", default="", help="comma-separated setup names")
    ap.add_argument("--slices", default="v4-8,v5e-8")
    ap.add_argument("--set", nargs="*", default=[], help="config changes key=value")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extra = {k: _value(v) for k, v in (s.split("=", 1) for s in args.set)}
    cache = out / "rows.json"
    rows = json.loads(cache.read_text()) if cache.exists() else []
    done = {(r["setup"], r["slice_arg"]) for r in rows}
    only = set(filter(None, args.only.split(",")))
    for name, module, preset, batch, overrides in SETUPS:
        if only and name not in only:
            continue
        for slice_name in args.slices.split(","):
            if (name, slice_name) in done:
                continue
            row = measure(name, module, preset, batch, overrides, slice_name, extra, out)
            row["slice_arg"] = slice_name
            rows.append(row)
            cache.write_text(json.dumps(rows, indent=1))
            print(json.dumps({k: v for k, v in row.items() if k != "census"}), flush=True)
    table = render(rows, extra)
    (out / "table.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
