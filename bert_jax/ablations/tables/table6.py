"""BERT Table 6: model size. A grid of (layers, hidden, heads), each pretrained alike, scored on
held-out masked-LM perplexity and fine-tuning; plotted as perplexity against encoder size."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from bert_jax.ablations import stats
from bert_jax.ablations.scales import Scale
from bert_jax.ablations.tables.base import Arm, Claim, Pretrain, Table
from bert_jax.ablations.tables.compare import beats, interval, judged

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def size_name(layers: int, hidden: int, heads: int) -> str:
    return f"L={layers},H={hidden},A={heads}"


def stack_size(name: str) -> tuple[int, int]:
    """An arm's (encoder-stack parameters 12 L H^2, heads), from its `size_name`: the paper's
    order of sizes, more heads counting as bigger at equal parameters."""
    layers, hidden, heads = (int(x) for x in re.findall(r"\d+", name))
    return 12 * layers * hidden**2, heads


# The paper's columns (perplexity, SST-2, MRPC) and the token task, which at the cpu scale is
# the one fine-tuned task that separates pretrained arms (Table 5).
TASKS = ("mlm_ppl", "sst2", "mrpc", "conll")


def arms(scale: Scale) -> list[Arm]:
    """One arm per (L, H, A) of the scale's grid (`--sizes`); `--model` does not apply."""
    return [Arm(size_name(*s), Pretrain("mlm", f"L{s[0]}-H{s[1]}-A{s[2]}", scale.steps), TASKS)
            for s in scale.sizes]  # fmt: skip


def claims(doc: dict) -> Iterator[Claim]:
    yield from _perplexity(doc)
    yield from _fine_tuned(doc)


def _perplexity(doc: dict) -> Iterator[Claim]:
    """Perplexity falls as the model grows: arms ordered by encoder parameters (12 L H^2); each
    step up judged by the interval of the held-out masked-LM loss (log perplexity, in nats),
    the smaller arm's minus the larger's, sequence by sequence over the held-out text. The
    whole ordering holds only when every step holds by its interval (reversed when one step
    is); documents without the loss rows (before 2026-11-29) are read by their medians."""
    sized = sorted((stack_size(arm), arm, row["mlm_ppl"]["median"])
                   for arm, row in doc["arms"].items() if "mlm_ppl" in row)  # fmt: skip
    if len(sized) < 2:
        return
    pairs = list(zip(sized, sized[1:], strict=False))
    rises = [f"{a} -> {b}" for (_, a, pa), (_, b, pb) in pairs if pb >= pa]
    steps = []
    for (_, small, p_small), (_, big, p_big) in pairs:
        if (d := interval(doc, small, big, "mlm_ppl")) is None:
            continue
        paper = [doc["arms"][a]["mlm_ppl"].get("paper") for a in (small, big)]
        effect = math.log(paper[0]) - math.log(paper[1]) if None not in paper else None
        steps.append(judged(f"held-out masked-LM loss falls from {small} to {big} (nats)", d,
                            effect, f"perplexity {p_small:.1f} vs {p_big:.1f}; loss "))  # fmt: skip
    whole = {
        "claim": "held-out masked-LM perplexity falls with every step up in encoder parameters",
        "holds": not rises,
        "detail": " > ".join(f"{p:.1f}" for _, _, p in sized)
        + (f"; not falling at {', '.join(rises)}" if rises else ""),
    }
    if steps:  # the steps' intervals decide, not the medians
        verdicts = [s["verdict"] for s in steps]
        verdict = (stats.REVERSED if stats.REVERSED in verdicts else
                   stats.HOLDS if len(steps) == len(pairs) and set(verdicts) == {stats.HOLDS}
                   else stats.UNRESOLVED)  # fmt: skip
        whole.update(holds=verdict == stats.HOLDS, verdict=verdict)
        whole["detail"] += (f"; {verdicts.count(stats.HOLDS)} of {len(pairs)} steps hold by "
                            "their intervals (below)")  # fmt: skip
    yield whole
    yield from steps


def _fine_tuned(doc: dict) -> Iterator[Claim]:
    """The largest arm (by encoder parameters) beats the smallest on each fine-tuned task both
    have: the paper's larger models are better on every task."""
    if len(doc["arms"]) < 2:
        return
    sized = sorted((stack_size(arm), arm) for arm in doc["arms"])
    small, big = sized[0][1], sized[-1][1]
    for task in doc["arms"][big]:
        if task != "mlm_ppl" and task in doc["arms"][small]:
            yield beats(doc, big, small, task, f"{big} beats {small} on {task}", by_std=False)


def plot(doc: dict, ax: Axes) -> None:
    """Perplexity against parameters of the encoder stack (L x H^2 x 12), log scale."""
    from matplotlib.ticker import NullFormatter

    points = sorted((stack_size(arm)[0], row["mlm_ppl"]["median"], arm)
                    for arm, row in doc["arms"].items() if "mlm_ppl" in row)  # fmt: skip
    if not points:  # --only_tasks left the perplexity out: nothing to draw, say so
        ax.text(0.5, 0.5, "no mlm_ppl column in this render (--only_tasks)", ha="center",
                transform=ax.transAxes)  # fmt: skip
        ax.set_axis_off()
        return
    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o")
    for i, (x, y, arm) in enumerate(points):  # arms of one size (A=1, A=2): lower one below
        below = i + 1 < len(points) and points[i + 1][0] == x
        ax.annotate(arm, (x, y), xytext=(4, -8 if below else 3), textcoords="offset points",
                    fontsize=6)  # fmt: skip
    ax.set_xscale("log")
    sizes = sorted({p[0] for p in points})
    ax.set_xticks(sizes, [f"{x / 1e6:.2g}M" for x in sizes])  # the arms', not 2x10^5 ...
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.margins(x=0.2)  # room for the largest arm's label
    ax.set_xlabel("encoder parameters (12 L H^2)")
    ax.set_ylabel("held-out masked-LM perplexity")


TABLE = Table(
    name="6",
    title="Table 6: model size (held-out masked-LM perplexity and fine-tuning)",
    summary="model size: held-out masked-LM perplexity and fine-tuning",
    arms=arms,
    # The paper's perplexities and dev results, by its (L, H, A).
    paper={
        "L=3,H=768,A=12": {"mlm_ppl": 5.84, "sst2": 88.4, "mrpc": 79.8},
        "L=6,H=768,A=3": {"mlm_ppl": 5.24, "sst2": 90.7, "mrpc": 82.2},
        "L=6,H=768,A=12": {"mlm_ppl": 4.68, "sst2": 91.3, "mrpc": 84.8},
        "L=12,H=768,A=12": {"mlm_ppl": 3.99, "sst2": 92.9, "mrpc": 86.7},
        "L=12,H=1024,A=16": {"mlm_ppl": 3.54, "sst2": 93.3, "mrpc": 86.9},
        "L=24,H=1024,A=16": {"mlm_ppl": 3.23, "sst2": 93.7, "mrpc": 87.8},
    },
    claims=claims,
    plot=plot,
)
