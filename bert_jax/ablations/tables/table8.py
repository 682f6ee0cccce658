"""BERT Table 8: masking mixes. Table 5's BERT run under each MASK/SAME/RND mix of the masked
positions, fine-tuned and used feature-based (NER)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from bert_jax.ablations import stats
from bert_jax.ablations.scales import Scale
from bert_jax.ablations.tables.base import Arm, Claim, Pretrain, Table
from bert_jax.ablations.tables.compare import (
    RANDOM_INIT,
    cell,
    interval,
    not_used,
    over_random_init,
)

MIXES = ("80/10/10", "100/0/0", "80/0/20", "80/20/0", "0/20/80", "0/0/100")


def arms(scale: Scale) -> list[Arm]:
    model, steps = scale.model, scale.steps
    mixed = [Arm(m, Pretrain("mlm", model, steps, m), ("mrpc", "conll", "conll_feature"))
             for m in MIXES]  # fmt: skip
    return [*mixed, Arm(RANDOM_INIT, Pretrain("mlm_nsp", model, 0), ("mrpc", "conll"))]


def _agree_by_intervals(doc: dict, task: str, mixes: list[str]) -> Claim:
    """Every pair of mixes within the paper's spread on `task` (stats.equivalence per pair):
    *holds* when every pair's does, *reversed* when one pair lies wholly outside the spread,
    *unresolvable at this scale* when an interval is wider than twice the spread (then no
    noise level this scale reaches could show agreement), else *unresolved*; None without
    intervals."""
    pairs = [(a, b, interval(doc, a, b, task)) for a, b in itertools.combinations(mixes, 2)]
    if not pairs or any(d is None for *_, d in pairs):
        return None
    paper = [n for m in mixes if (n := TABLE.paper_number(m, task)) is not None]
    bound = max(paper) - min(paper) if len(paper) > 1 else 1.0
    each = {stats.equivalence(d, bound) for *_, d in pairs}
    verdict = next(v for v in (stats.REVERSED, stats.UNRESOLVABLE, stats.UNRESOLVED, stats.HOLDS)
                   if v in each)  # fmt: skip
    a, b, d = max(pairs, key=lambda p: p[2]["high"] - p[2]["low"])
    return {
        "claim": f"the masking mixes agree on {task} (every pair within the paper's spread, "
                 f"{bound:.1f} points)",
        "holds": verdict == stats.HOLDS,
        "verdict": verdict,
        "interval": [d["low"], d["high"]],
        "detail": f"{len(pairs)} pairs; widest interval {a} - {b}: [{d['low']:+.2f}, "
                  f"{d['high']:+.2f}] over {d['examples']} examples",
    }  # fmt: skip


def _learned(doc: dict, arm: str, task: str) -> bool | None:
    """Whether `arm` learned `task` at all: its interval over the scored split's best constant
    above 0 (random init can sit below that constant: conll's every-word B-MISC); in documents
    from before those intervals, its interval over random init, else its median above the
    best constant; None when the document has none of them."""
    for bar in (stats.BEST_CONSTANT, RANDOM_INIT):
        if (d := interval(doc, arm, bar, task)) is not None:
            return stats.verdict(d) == stats.HOLDS
    best = doc.get("baselines", {}).get(task, {}).get("best_constant")
    c = cell(doc, arm, task)
    return None if best is None or c is None else c["median"] > best


def claims(doc: dict) -> Iterator[Claim]:
    """The paper's mixes lie within 0.8 (MNLI), 0.5 (NER) and 0.9 (feature-based NER) points:
    here every pairwise interval against that spread, or (documents without intervals) the
    spread of the medians within 3x the largest seed std of the mixes."""
    yield from over_random_init(doc)
    mixes = [a for a in doc["arms"] if a.count("/") == 2]
    tasks = dict.fromkeys(t for a in mixes for t in doc["arms"][a])
    for task in tasks:
        cells = [c for a in mixes if (c := cell(doc, a, task)) is not None]
        if len(cells) < 2:
            continue
        having = [a for a in mixes if cell(doc, a, task) is not None]
        if (unused := not_used(doc, task, f"the masking mixes agree on {task}")) is not None:
            yield unused
            continue
        # Mixes that all answer a constant agree to the last example: no evidence.
        if idle := [a for a in having if _learned(doc, a, task) is False]:
            yield {
                "claim": f"the masking mixes agree on {task}", "holds": False,
                "verdict": stats.UNRESOLVED,
                "detail": f"{len(idle)} of {len(having)} mixes ({', '.join(idle)}) are not "
                          f"above the best constant (older documents: random init) on {task}: "
                          "agreement among models that did not learn the task is no evidence",
            }  # fmt: skip
            continue
        if (judged := _agree_by_intervals(doc, task, having)) is not None:
            yield judged
            continue
        spread = max(c["median"] for c in cells) - min(c["median"] for c in cells)
        std = max(c["std"] for c in cells)
        yield {
            "claim": f"the masking mixes agree on {task} (spread within 3x the largest seed std)",
            "holds": bool(spread <= 3 * std),
            "detail": f"spread {spread:.2f} over {len(cells)} mixes, largest std {std:.2f}",
        }


TABLE = Table(
    name="8",
    title="Table 8: masking mixes (MASK/SAME/RND)",
    summary="MASK/SAME/RND mixes",
    arms=arms,
    # bert_reference.md: dev results; our "mrpc" stands in for MNLI.
    paper={
        "80/10/10": {"mrpc": 84.2, "conll": 95.4, "conll_feature": 94.9},
        "100/0/0": {"mrpc": 84.3, "conll": 94.9, "conll_feature": 94.0},
        "80/0/20": {"mrpc": 84.1, "conll": 95.2, "conll_feature": 94.6},
        "80/20/0": {"mrpc": 84.4, "conll": 95.2, "conll_feature": 94.7},
        "0/20/80": {"mrpc": 83.7, "conll": 94.8, "conll_feature": 94.6},
        "0/0/100": {"mrpc": 83.6, "conll": 94.9, "conll_feature": 94.6},
    },
    claims=claims,
)
