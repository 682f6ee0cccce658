"""A table's scores -> `<table>.json` (the stable format scripts read), `<table>.md` and plots.

JSON: {"table": T, "scale": S, "finetune": {"epochs", "learning_rate"} or null,
           (rates chosen on a slice of train: "learning_rate" null, "candidates": [LR],
           "chosen": {ARM: {TASK: LR}})
       "arms": {ARM: {TASK: {"median", "std", "n", "paper"}}},
       "baselines": {TASK: {"majority": m, "best_constant": c, "constant_answer": a}},
       "pretraining": {ARM: {"mlm_accuracy", "unigram", "context_free"}},   (masked-LM arms,
           one entry per pretraining run: "ARM, pretraining seed P" for seeds after the first;
           ELECTRA adds "hidden_accuracy", "discriminator_accuracy", "always_original",
           "discriminator_loss", "constant_loss", "discriminator_auc", "token_alone_loss",
           "token_alone_auc";
           left-to-right LMs {"lm_accuracy", "unigram"})
       "intervals": {TASK: {"A - B": {"diff", "low", "high", "examples", "runs": [nA, nB],
           "units": [uA, uB], "unit_kinds": [..], "df", "method": "welch"}}},
       "claims": [{"claim", "holds", "detail", "verdict", "interval"}],   (claims.py)
       "uncalibrated": [TASK],   (when the workdir's calibration table has been run: tasks
           whose ceiling is too close to their floor; claims on them are "not used")
       "ceiling": {"arm", "same_budget", "cells": {TASK: {"median", ...}}},   (the workdir's
           calibration's pretrained MiniLM-L6 per task, shown beside random init and the best
           constant; same_budget: fine-tuned at this table's epochs and rates)
       "wiring_check": true | false}   (--quick: no claim is scored, the md says why)

`majority` is the training split's most frequent answer scored on dev (kept for scripts that
read it); `best_constant` is the best single answer on the scored split itself, the baseline an
arm must beat (bert_jax.ablations.stats.best_constant). `intervals`: every pair of arms sharing
a task, A minus B with its calibrated 95% interval (bert_jax.ablations.interval: Welch's t over
the arms' pretraining runs, with the dev examples' sampling added; since 2026-11-29, before which
it was the paired two-level bootstrap), and every arm minus the best constant ("A - best
constant", a fixed answer); claims judged by them carry a `verdict` (holds, reversed, unresolved
at this scale) and their `interval`. An interval over one run in all is unbounded (-Infinity,
Infinity in the json).

`context_free` is the held-out masked-LM accuracy of answering the most frequent target at
[MASK] and the shown token elsewhere: a pretrained arm at or below it has not learned to use
context, and its fine-tuning scores say little about its objective.
"""

from __future__ import annotations

import json
import math

import numpy as np
from etils import epath

from bert_jax.ablations import assembly, claims, stats, tables
from bert_jax.ablations.evidence import Evidence, check_belongs, identity_of, rows_path
from bert_jax.atomic_write import read_json, write_json_atomic, write_text_atomic
from bert_jax.errors import BertJaxError

# What a `--quick` table is: its budgets are too small to learn anything, by design.
WIRING_CHECK = (
    "a wiring check (--quick): every arm pretrained and fine-tuned end to end on budgets too "
    "small to learn (its fine-tuning scores sit at the majority class by design), so none of "
    "the paper's claims is scored; run without --quick to test them"
)


def summarize(values: list[float], paper: float | None) -> dict:
    v = np.asarray(values, np.float64)
    return {
        "median": float(np.median(v)),
        "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
        "n": len(v),
        "paper": paper,
    }


def write(
    out_dir: str, table: str, scale: str, arms: dict, baselines: dict, finetune: dict | None,
    pretraining: dict | None = None, evidence: Evidence | None = None,
    uncalibrated: list[str] | None = None, compute: dict | None = None,
    ceiling: dict | None = None, left_out: list[str] | None = None,
    provenance: dict | None = None, assembled: dict | None = None,
) -> dict:  # fmt: skip
    """The table document, its md and plot in `out_dir`, and `evidence` (the per-example rows
    its intervals are computed from) beside them."""
    doc = {"table": table, "scale": scale, "finetune": finetune, "arms": arms,
           "baselines": baselines, "pretraining": pretraining or {},
           "intervals": evidence.intervals() if evidence else {}}  # fmt: skip
    if compute is not None:  # bert_jax.ablations.run_time
        doc["compute"] = compute
    if uncalibrated is not None:  # the workdir's calibration table has been run
        doc["uncalibrated"] = uncalibrated
    if ceiling is not None:
        doc["ceiling"] = ceiling
    if left_out:  # `--only_tasks`: the table's other columns were not run
        doc["tasks_left_out"] = left_out
    if provenance is not None:  # bert_jax.ablations.provenance.of_table
        doc["provenance"] = provenance
    if assembled is not None:  # --assemble: which units each arm was made of
        doc["assembled_from_units"] = assembled
    wiring = scale == "quick"  # claims scored on its numbers would read as findings
    doc["claims"] = [] if wiring else claims.check(doc)
    doc["wiring_check"] = wiring
    out = epath.Path(out_dir)
    _save(doc, out / f"{table}.json", evidence)
    plot(doc, out)
    return doc


def rerender(path: str) -> dict:
    """A written table's intervals and verdicts computed again from its saved per-example rows
    (bert_jax.ablations.evidence), without its workdir: PATH and its md are rewritten."""
    where = epath.Path(path)
    doc = read_json(where, f"{where}: no such file (a table's json, as bert-jax ablate wrote it)")
    if doc.get("table") not in tables.names():
        raise BertJaxError(f"{where}: not a table that bert-jax ablate wrote (no known 'table')")
    rows = rows_path(where)
    evidence = Evidence.load(rows)
    check_belongs(evidence, doc, rows, where)  # not another table's (or run's) rows beside it
    doc["intervals"] = evidence.intervals()
    doc["claims"] = [] if doc.get("wiring_check") else claims.check(doc)
    _save(doc, where)
    return doc


def check_keeps_columns(out_dir: str, table: str, every: list[str], only: tuple[str, ...]) -> None:
    """A render of some columns (`--only_tasks` `only` of the table's tasks `every`) writes
    `<table>.json`, md and rows in `out_dir`: refused before any run when the table there
    holds columns it leaves out, which it would replace (a finished table's results are never
    lost to a narrower render)."""
    path = epath.Path(out_dir) / f"{table}.json"
    if not only or not path.exists():
        return
    doc = read_json(path, f"{path}: no such file")
    held = [t for t in dict.fromkeys(t for row in doc.get("arms", {}).values() for t in row)
            if t not in only]  # fmt: skip
    if not held:
        return
    both = [t for t in every if t in only or t in held] + [t for t in held if t not in every]
    add = "drop --only_tasks" if both == every else f"--only_tasks={','.join(both)}"
    raise BertJaxError(
        f"--only_tasks={','.join(only)}: {path} holds table {table}'s {', '.join(held)} too, "
        f"which this render leaves out: add {'it' if len(held) == 1 else 'them'} ({add}; "
        f"finished runs are reused), or move {path} and its .md and .rows.npz away first"
    )


def _save(doc: dict, path: epath.Path, evidence: Evidence | None = None) -> None:
    """The json (rows first: a json on disk always has its rows) and its md beside it."""
    if evidence is not None:
        evidence.save(rows_path(path), identity_of(doc))
    write_json_atomic(path, json_safe(doc), sort_keys=False)
    write_text_atomic(path.parent / (path.name.removesuffix(".json") + ".md"), markdown(doc))


def json_safe(value):
    """`value` with infinite and NaN floats as null (JSON has no Infinity: an interval of one
    run is unbounded, and jq or a browser would refuse the file)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def markdown(doc: dict) -> str:
    tasks = list(dict.fromkeys(t for row in doc["arms"].values() for t in row))
    lines = [f"# {tables.get(doc['table']).title} ({doc['scale']} scale)", ""]
    budget = doc.get("finetune")
    how = ""
    if budget and budget.get("chosen"):
        among = ", ".join(f"{lr:g}" for lr in budget["candidates"])
        how = (f", fine-tuned {_epochs(budget, tasks)} at each arm's learning rate, chosen "
               f"per task from {{{among}}} on a held fifth of train (never dev)")
    elif budget:  # tables written before the budget was recorded have none
        how = f", fine-tuned {_epochs(budget, tasks)} at lr {budget['learning_rate']:g}"
    if doc.get("wiring_check"):
        lines += [f"**This is {WIRING_CHECK}.**", ""]
    lines.append(f"median ± std over n runs{how} (paper's number in brackets)")
    if left := doc.get("tasks_left_out"):
        lines += ["", f"Only some of the table's tasks were run (--only_tasks); left out: "
                  f"{', '.join(left)}."]  # fmt: skip
    if used := doc.get("assembled_from_units"):
        lines += ["", *assembly.describe(used)]
    lines += ["", "| arm | " + " | ".join(tasks) + " |", "|---" * (len(tasks) + 1) + "|"]
    for arm, row in doc["arms"].items():
        cells = []
        for t in tasks:
            r = row.get(t)
            if r is None:
                cells.append("")
                continue
            paper = f" [{r['paper']}]" if r["paper"] is not None else ""
            cells.append(f"{r['median']:.2f} ± {r['std']:.2f} (n={r['n']}){paper}")
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    if budget and budget.get("chosen"):
        chosen = [f"{arm}: " + ", ".join(f"{t} {lr:g}" for t, lr in row.items())
                  for arm, row in budget["chosen"].items() if row]  # fmt: skip
        tail = ["", "Learning rates chosen on the slice of train: " + "; ".join(chosen) + "."]
    else:
        tail = []
    if budget and (budget.get("task_epochs") or budget.get("seq")):
        epochs = ", ".join(f"{t} {e:g}" for t, e in budget.get("task_epochs", {}).items())
        seqs = ", ".join(f"{t} {n}" for t, n in budget.get("seq", {}).items())
        tail += ["", f"Epochs where a task's differ: {epochs or 'none'}. Fine-tuning sequence "
                 f"length per task (its longest example, rounded up to 32): {seqs}."]  # fmt: skip
    for arm, row in (budget or {}).get("released_seq", {}).items():
        seqs = ", ".join(f"{t} {n}" for t, n in row.items())
        tail += ["", f"{arm}'s lengths, in its own vocab: {seqs}."]
    if doc["baselines"]:
        best = all("best_constant" in b for b in doc["baselines"].values())
        split = "dev" if budget else "held-out pairs"  # nothing fine-tuned: NSP/SOP's table
        key, name = ("best_constant", f"best constant ({split})") if best else ("majority",) * 2
        row = [f"{doc['baselines'][t][key]:.2f}" if t in doc["baselines"] else ""
               for t in tasks]  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    if top := doc.get("ceiling"):  # the third reference point, from the calibration table
        where = "" if top["same_budget"] else ", at another fine-tuning budget"
        row = [f"{c['median']:.2f}" if (c := top["cells"].get(t)) else "" for t in tasks]
        lines.append(f"| ceiling: {top['arm']} (calibration{where}) | " + " | ".join(row) + " |")
    lines += tail + _against_constant(doc, tasks)
    if c := doc.get("compute"):
        untimed = (f"; {c['untimed_runs']} of its {c['runs']} runs were made before run times "
                   "were recorded and are not counted") if c["untimed_runs"] else ""  # fmt: skip
        lines += ["", f"Run time, summed over its {c['runs']} runs (one process each): "
                  f"pretraining {c['pretraining_h']:.2f} h, choosing rates "
                  f"{c['choosing_h']:.2f} h, fine-tuning {c['finetuning_h']:.2f} h{untimed}."]
    masked = {a: r for a, r in doc.get("pretraining", {}).items() if "mlm_accuracy" in r}
    if masked:
        lines += ["", "Held-out masked-LM accuracy after pretraining, against the context-free "
                  "predictor (the most frequent target at [MASK], the shown token elsewhere): "
                  "an arm not above it has not learned to use context.", "",
                  "| arm | masked-LM accuracy | context-free | margin | unigram |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for arm, r in masked.items():
            margin = r["mlm_accuracy"] - r["context_free"]
            lines.append(f"| {arm} | {r['mlm_accuracy']:.4f} | {r['context_free']:.4f} | "
                         f"{margin:+.4f} | {r['unigram']:.4f} |")  # fmt: skip
    causal = {a: r for a, r in doc.get("pretraining", {}).items() if "lm_accuracy" in r}
    if causal:
        lines += ["", "Left-to-right LMs: held-out next-token accuracy against always answering "
                  "the most frequent training token.", "",
                  "| arm | next-token accuracy | unigram | margin |", "|---|---|---|---|"]
        for arm, r in causal.items():
            lines.append(f"| {arm} | {r['lm_accuracy']:.4f} | {r['unigram']:.4f} | "
                         f"{r['lm_accuracy'] - r['unigram']:+.4f} |")  # fmt: skip
    electra = {a: r for a, r in doc.get("pretraining", {}).items() if "discriminator_accuracy" in r}
    if electra:
        lines += ["", "ELECTRA: its generator where the input hides the original ([MASK] or "
                  "a random id; copying cannot score) against the unigram rate, and its "
                  "discriminator against always answering \"original\": in accuracy, and in "
                  "loss against that constant answer's best (the binary entropy of the "
                  "replaced fraction), which shows learning before accuracy at 0.5 does; "
                  "and its ROC AUC, the chance that it scores a replaced token above an "
                  "original one (0.5: no ranking; no threshold involved). Loss and AUC are "
                  "also set against a detector that sees each token alone (its replaced rate "
                  "on training batches): a discriminator above it uses context.", "",
                  "| arm | generator, hidden positions | unigram | discriminator | "
                  "always original | discriminator loss | constant's loss | token-alone loss "
                  "| discriminator AUC | token-alone AUC |",
                  "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for arm, r in electra.items():
            cells = [r.get(k) for k in ("hidden_accuracy", "unigram", "discriminator_accuracy",
                                        "always_original", "discriminator_loss",
                                        "constant_loss", "token_alone_loss",
                                        "discriminator_auc", "token_alone_auc")]  # fmt: skip
            shown = ["" if v is None else f"{v:.4f}" for v in cells]
            lines.append(f"| {arm} | " + " | ".join(shown) + " |")
    if p := doc.get("provenance"):
        lines += ["", f"Rendered by {p['rendered_by']} from runs made by "
                  f"{'; '.join(p['made_by']) or 'none timed'}; suite v{p['suite_version']} "
                  f"(sha256 {p['suite_sha256'][:12]}), pretraining text sha256 "
                  f"{p['text_sha256'][:12]}, settings sha256 {p['settings_sha256'][:12]}."]
    if doc.get("claims"):
        whose = tables.get(doc["table"]).whose
        lines += ["", f"{whose[0].upper()}{whose[1:]} claims at this scale:", ""]
        for c in doc["claims"]:
            lines.append(f"- {verdict_of(c)}: {c['claim']}: {c['detail']}")
    return "\n".join(lines) + "\n"


def _epochs(budget: dict, tasks: list[str]) -> str:
    """"3 epochs" when every shown task trained that many, else "each task's epochs (below)"
    (a table run on conll alone trained 30, not the default 3)."""
    own = budget.get("task_epochs", {})
    counts = {own.get(t, budget["epochs"]) for t in tasks} or {budget["epochs"]}
    return f"{counts.pop():g} epochs" if len(counts) == 1 else "each task's epochs (below)"


def _against_constant(doc: dict, tasks: list[str]) -> list[str]:
    """Each arm minus the best constant, per task, with its interval (documents from before
    these intervals have none: no lines)."""
    intervals = doc.get("intervals", {})
    shown = {arm: {t: d for t in tasks
                   if (d := intervals.get(t, {}).get(f"{arm} - {stats.BEST_CONSTANT}"))}
             for arm in doc["arms"]}  # fmt: skip
    columns = [t for t in tasks if any(t in row for row in shown.values())]
    if not columns:
        return []
    method = ("calibrated 95% interval (Welch's t over its pretraining runs, the scored "
              "examples' sampling added; bert_jax.ablations.interval)"
              if any("units" in d for row in shown.values() for d in row.values())
              else "paired bootstrap 95% interval over the scored examples and the arm's runs")
    lines = ["", f"Each arm minus the best constant of the scored split, in points, with its "
             f"{method}:", "",
             "| arm | " + " | ".join(columns) + " |",
             "|---" * (len(columns) + 1) + "|"]  # fmt: skip
    for arm, row in shown.items():
        cells = [_with_interval(d) if (d := row.get(t)) else "" for t in columns]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return lines


def _with_interval(d: dict) -> str:
    if math.isinf(d["low"]) or math.isinf(d["high"]):  # one run: no spread to measure
        return f"{d['diff']:+.2f} (one run: no interval)"
    return f"{d['diff']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]"


def verdict_of(claim: dict) -> str:
    """holds / reversed / unresolved at this scale (interval-judged claims), else holds / does
    not hold (rules on medians)."""
    return claim.get("verdict") or ("holds" if claim["holds"] else "does not hold")


def tally(claims_: list[dict]) -> str:
    """`3 hold, 1 reversed, 5 unresolved at this scale` (verdicts in order of first use)."""
    counts: dict[str, int] = {}
    for c in claims_:
        counts[verdict_of(c)] = counts.get(verdict_of(c), 0) + 1
    words = {"holds": "hold", "does not hold": "do not hold"}
    return ", ".join(f"{n} {words.get(v, v) if n != 1 else v}" for v, n in counts.items())


def plot(doc: dict, out: epath.Path) -> None:
    """`<table>.png`, for the tables that draw one (`Table.plot`)."""
    table = tables.get(doc["table"])
    if table.plot is None:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    table.plot(doc, ax)
    ax.set_title(table.title, fontsize=8)
    fig.tight_layout()
    fig.savefig(str(out / f"{doc['table']}.png"), dpi=120)
    plt.close(fig)


def read(path: str) -> dict:
    return json.loads(epath.Path(path).read_text())
