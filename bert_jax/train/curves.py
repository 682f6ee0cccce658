"""The loss and evaluation curves of a run as a PNG, drawn from the metrics.jsonl the loop writes
(bert_jax.train.writers), and the lines that end a run: where the PNG is and how to open the
TensorBoard events (no viewer is installed with bert-jax).

    write_curves(workdir)                      # pretraining: W/curves.png
    write_curves(workdir, final=dev_metrics)   # fine-tuning: the dev scores beside the curves

Left panel: every training loss the run logs (loss, masked_lm_loss, next_sentence_loss, ...)
and the held-out losses (eval_*loss) as points. Right panel: the training accuracies and the
held-out ones, and for fine-tuning the final dev scores (eval_results.json) at the last step.
"""

from __future__ import annotations

import json
import os
from typing import Any

from absl import logging
from etils import epath

from bert_jax.atomic_write import open_atomic

PNG = "curves.png"
# Training-record keys that are bookkeeping, not curves.
_NOT_CURVES = ("grad_norm", "learning_rate", "tokens_per_sec", "seq_per_sec", "mfu", "peak_flops",
               "nonfinite_consecutive", "update_skipped")  # fmt: skip


def read_metrics(workdir: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of workdir/metrics.jsonl (a line cut by a kill is skipped)."""
    path = epath.Path(workdir) / "metrics.jsonl"
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def _series(records: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    points = [(r["step"], r[key]) for r in records if isinstance(r.get(key), int | float)]
    return [s for s, _ in points], [v for _, v in points]


def draw(
    records: list[dict[str, Any]],
    out: str | os.PathLike,
    title: str = "",
    final: dict[str, float] | None = None,
    baselines: dict[str, float] | None = None,
) -> None:
    """Draw `records` (metrics.jsonl) to the PNG `out`. `final`: scores at the last step (dev
    metrics of a fine-tuning run); `baselines`: label -> accuracy, drawn as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in records if not any(k.startswith("eval_") for k in r)]
    evals = [r for r in records if any(k.startswith("eval_") for k in r)]
    keys = sorted({k for r in train for k in r if k != "step" and k not in _NOT_CURVES})
    eval_keys = sorted({k for r in evals for k in r if k.startswith("eval_")})
    losses = [k for k in keys if k.endswith("loss")]
    scores = [k for k in keys if not k.endswith("loss")]
    eval_losses = [k for k in eval_keys if k.endswith("loss")]
    eval_scores = [k for k in eval_keys if not k.endswith("loss")]
    # A metric and its held-out twin (masked_lm_loss, eval_masked_lm_loss) share a colour.
    names = sorted({k.removeprefix("eval_") for k in keys + eval_keys})
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color = {n: cycle[i % len(cycle)] for i, n in enumerate(names)}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for ax, train_keys, eval_keys_ in ((ax1, losses, eval_losses), (ax2, scores, eval_scores)):
        for k in train_keys:
            ax.plot(*_series(train, k), color=color[k], label=k)
        for k in eval_keys_:
            name = k.removeprefix("eval_")
            ax.plot(*_series(evals, k), "o--", color=color[name], label=f"held-out {name}")
    ax1.set(xlabel="step", ylabel="loss", title=title or "training loss")
    last = max((r["step"] for r in records), default=0)
    for name, value in (final or {}).items():
        if name != "train_steps" and isinstance(value, int | float):
            ax2.plot([last], [value], "*", markersize=12, label=f"dev {name} {value:.3f}")
    styles = iter(("--", ":", "-."))
    for label, value in (baselines or {}).items():
        ax2.axhline(value, color="gray", linestyle=next(styles, "--"), label=label)
    ax2.set(xlabel="step", ylabel="accuracy / score")
    for ax in (ax1, ax2):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    # Fixed margins: tight_layout draws the figure once more to measure it (0.2 of 0.55 s a
    # plot, and every run draws one).
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.12, top=0.92, wspace=0.25)
    with open_atomic(out, binary=True) as f:
        fig.savefig(f, format="png", dpi=80)
    plt.close(fig)


def write_curves(
    workdir: str | os.PathLike, final: dict[str, float] | None = None, title: str = ""
) -> epath.Path | None:
    """workdir/curves.png from its metrics.jsonl, then the run's last lines: the PNG's path and
    how to open the TensorBoard events. A plot that cannot be drawn is a warning, not a failed
    run: the checkpoints and metrics are already written."""
    import jax

    if jax.process_index() != 0:
        return None
    wd = epath.Path(workdir)
    records = read_metrics(wd)
    if not records:
        return None
    out = wd / PNG
    try:
        draw(records, out, title=title or os.fspath(wd), final=final)
    except Exception as e:  # noqa: BLE001 (the run itself succeeded)
        logging.warning("%s: the curves were not drawn: %s: %s", out, type(e).__name__, e)
        return None
    print(f"curves (loss, accuracy, held-out evaluations): {out}")
    print(f"TensorBoard events: {wd / 'tensorboard'}; to view them: pip install tensorboard && "
          f"tensorboard --logdir {wd / 'tensorboard'}")  # fmt: skip
    return out
