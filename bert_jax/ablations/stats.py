"""Per-example scores of fine-tuning runs, the best constant answer of a scored split, and the
verdicts read off the interval of a difference between two arms (bert_jax.ablations.interval).

    rows = example_rows("sst2", task_dir, run_dir)           # N x K sufficient statistics
    d = interval.difference([rows_a1, rows_a2], [rows_b1, rows_b2], "sst2", groups_a=..., ...)
    verdict(d, paper_effect=0.5)

A task's headline is a function of column sums of its per-example rows: accuracy (GLUE-layout
tasks) has rows [correct]; SQuAD F1 [best F1 against the gold answers]; CoNLL entity F1 [true
positives, predicted entities, gold entities] per sentence (micro F1 = 2 tp / (predicted +
gold), seqeval's default conlleval matching).

`two_level_bootstrap` is the interval the tables used until 2026-11-29. It resamples the
pretraining runs, then each one's fine-tuning runs, and the examples. With two pretraining runs it
cannot measure the spread between them, and equal arms came out "holds" or "reversed" up to a
quarter of the time. It is kept as the A/A test's reference (bert_jax.ablations.aa_test).
"""

from __future__ import annotations

import collections
import functools
import io
import json
from collections.abc import Callable

import numpy as np
from etils import epath

from bert_jax.atomic_write import write_bytes_atomic

# How each downstream kind is scored from its rows' column sums (x 100, as the tables print).
ACCURACY, MEAN_F1, ENTITY_F1 = "accuracy", "mean_f1", "entity_f1"
# Held-out masked-LM loss in nats per predicted token (Table 6's mlm_ppl is its exp): rows are
# [loss summed over a sequence's predictions, its predictions] (checks.masked_lm_loss_rows).
MASKED_LM_LOSS = "masked_lm_loss"


def metric_of(kind: str) -> str:
    kind = kind.removesuffix("_feature")
    return {"squad": MEAN_F1, "conll": ENTITY_F1, "mlm_ppl": MASKED_LM_LOSS}.get(kind, ACCURACY)


def headline(metric: str, sums_xK: np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """The score x 100 from column sums (`sums_xK`: ... x K) over `n` examples; the masked-LM
    loss in nats (the mean over predicted tokens)."""
    if metric == MASKED_LM_LOSS:
        return sums_xK[..., 0] / np.maximum(sums_xK[..., 1], 1e-12)
    if metric == ENTITY_F1:
        tp, predicted, gold = sums_xK[..., 0], sums_xK[..., 1], sums_xK[..., 2]
        return 100.0 * 2.0 * tp / np.maximum(predicted + gold, 1e-12)
    return 100.0 * sums_xK[..., 0] / n


def cached_rows(path: epath.Path, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """A run's per-example rows, kept in the compressed npz `path`: `compute()`d and written
    whole on first use (a unit carries the file, not what it was computed from)."""
    if not path.exists():
        buffer = io.BytesIO()
        np.savez_compressed(buffer, rows=compute())
        write_bytes_atomic(path, buffer.getvalue())
    with np.load(io.BytesIO(path.read_bytes())) as npz:
        return npz["rows"]


def example_rows(kind: str, task_dir: str, run_dir: str) -> np.ndarray:
    """N x K statistics of one fine-tuning run's dev predictions, in the dev file's order."""
    kind = kind.removesuffix("_feature")
    run = epath.Path(run_dir)
    if kind == "squad":
        from bert_jax.tasks import squad, squad_eval

        dev = squad.load_dataset(f"{task_dir}/dev-v1.1.json")
        preds = json.loads((run / "predictions.json").read_text())
        return np.array([[max(squad_eval.f1_score(preds.get(qa["id"], ""), a["text"])
                              for a in qa["answers"])]
                         for art in dev for p in art["paragraphs"] for qa in p["qas"]])  # fmt: skip
    if kind == "conll":
        return _entity_rows((run / "dev_predictions.txt").read_text())
    from bert_jax.tasks import glue

    spec = glue.get_spec(kind)
    gold = [str(ex.label) for ex in glue.read_split(spec, task_dir, spec.dev_splits[0])]
    lines = (run / "dev_predictions.tsv").read_text().splitlines()[1:]
    preds = [line.split("\t", 1)[1] for line in lines]
    return np.array([[float(p == g)] for p, g in zip(preds, gold, strict=True)])


def _entity_rows(conll_text: str) -> np.ndarray:
    """[tp, predicted, gold] entities per sentence of `word gold predicted` columns."""
    blocks = [[line.split(" ") for line in block.splitlines() if line]
              for block in conll_text.strip("\n").split("\n\n")]  # fmt: skip
    return _tag_rows([[c[1] for c in b] for b in blocks], [[c[2] for c in b] for b in blocks])


def _tag_rows(gold: list[list[str]], pred: list[list[str]]) -> np.ndarray:
    """[tp, predicted, gold] entities per sentence of tag sequences."""
    rows = []
    for g, p in zip(gold, pred, strict=True):
        want, got = _entities(tuple(g)), _entities(tuple(p))
        rows.append([len(want & got), len(got), len(want)])
    return np.array(rows, np.float64)


@functools.lru_cache(maxsize=1 << 16)
def _entities(tags: tuple[str, ...]) -> frozenset:
    """seqeval's entities of one sentence's tags; a table reads the same dev sentences' gold
    (and many runs' equal predictions) once per run, so each sequence is parsed once."""
    from seqeval.metrics.sequence_labeling import get_entities

    return frozenset(get_entities(list(tags)))


def best_constant(kind: str, task_dir: str) -> dict[str, object]:
    """The best score x 100 of one answer given to every example of the scored (dev) split,
    with that answer: the most frequent dev label; for SQuAD the dev answer text with the
    highest F1 among the 50 most frequent; for CoNLL the entity tag whose every-word tagging
    scores best (all "O" predicts no entity: F1 0). Each candidate is scored from its
    `constant_rows`, as the tables score a run."""
    candidates, rows_of = _constants(kind, task_dir)
    metric = metric_of(kind)

    def score(answer: str) -> float:
        rows = rows_of(answer)
        return float(headline(metric, rows.sum(0), len(rows)))

    scored = [(score(a), a) for a in candidates]
    # Ties go to the first candidate: the labels in frequency order, then the largest name.
    best = max(scored, key=lambda pair: pair[0])
    return {"score": best[0], "answer": best[1]}


def constant_rows(kind: str, task_dir: str, answer: str) -> np.ndarray:
    """N x K statistics, as `example_rows` gives a run's, of `answer` given to every dev
    example: the best constant (`best_constant`'s answer) set against each arm pair by pair."""
    return _constants(kind, task_dir)[1](answer)


def _constants(kind: str, task_dir: str) -> tuple[list[str], Callable[[str], np.ndarray]]:
    """A kind's candidate constant answers on its dev split (in tie-breaking order) and the
    per-example rows of any one answer, the dev file read once."""
    kind = kind.removesuffix("_feature")
    if kind == "squad":
        from bert_jax.tasks import squad, squad_eval

        dev = squad.load_dataset(f"{task_dir}/dev-v1.1.json")
        golds = [[a["text"] for a in qa["answers"]]
                 for art in dev for p in art["paragraphs"] for qa in p["qas"]]  # fmt: skip
        texts = collections.Counter(t for g in golds for t in g)

        def best_f1(answer: str) -> np.ndarray:
            return np.array([[max(squad_eval.f1_score(answer, t) for t in g)] for g in golds])

        return sorted((t for t, _ in texts.most_common(50)), reverse=True), best_f1
    if kind == "conll":
        from bert_jax.tasks import ner

        tags = [list(s.tags) for s in ner.read_conll(f"{task_dir}/valid.txt")]

        def every_word(answer: str) -> np.ndarray:
            return _tag_rows(tags, [[answer] * len(t) for t in tags])

        return sorted(ner.LABELS, reverse=True), every_word
    from bert_jax.tasks import glue

    spec = glue.get_spec(kind)
    labels = [str(ex.label) for ex in glue.read_split(spec, task_dir, spec.dev_splits[0])]

    def correct(answer: str) -> np.ndarray:
        return np.array([[float(label == answer)] for label in labels])

    return [label for label, _ in collections.Counter(labels).most_common()], correct


def two_level_bootstrap(
    runs_a: list[np.ndarray], runs_b: list[np.ndarray], kind: str, draws: int = 2000,
    seed: int = 0, groups_a: list[int] | None = None, groups_b: list[int] | None = None,
) -> dict[str, float]:  # fmt: skip
    """Arm A minus arm B (mean over runs of the headline), with its paired bootstrap 95%
    interval over examples and runs. Every run's rows must be the same N examples in order.
    `groups_*` name each run's pretraining run: the runs are then drawn in two levels, the
    pretraining runs with replacement and each drawn one's fine-tuning runs with replacement
    (the multi-bootstrap of Sellam et al. 2022, MultiBERTs), so that runs sharing a pretraining
    run count as one draw of pretraining, not as independent ones. None: one group."""
    metric = metric_of(kind)
    n = len(runs_a[0])
    if any(len(r) != n for r in (*runs_a, *runs_b)):
        raise ValueError(f"{kind}: runs scored on different numbers of examples")
    rng = np.random.default_rng(seed)
    weights_BxN = rng.multinomial(n, np.full(n, 1.0 / n), size=draws).astype(np.float64)

    def arm(runs: list[np.ndarray], groups: list[int] | None) -> tuple[float, np.ndarray]:
        full = np.mean([headline(metric, r.sum(0), n) for r in runs])
        per_run_BxR = np.stack([headline(metric, weights_BxN @ r, n) for r in runs], axis=1)
        pick_BxK = _two_level_draws(rng, groups or [0] * len(runs), draws)
        return float(full), np.take_along_axis(per_run_BxR, pick_BxK, 1).mean(1)

    (a, boot_a), (b, boot_b) = arm(runs_a, groups_a), arm(runs_b, groups_b)
    low, high = np.percentile(boot_a - boot_b, [2.5, 97.5])
    return {"diff": a - b, "low": float(low), "high": float(high), "examples": n,
            "runs": [len(runs_a), len(runs_b)]}  # fmt: skip


def _two_level_draws(rng: np.random.Generator, groups: list[int], draws: int) -> np.ndarray:
    """draws x K indices into the runs: G groups drawn with replacement, then F runs drawn with
    replacement inside each drawn group (F: the largest group's size, so every drawn group
    weighs the same), K = G x F."""
    members = [np.flatnonzero(np.asarray(groups) == g) for g in dict.fromkeys(groups)]
    sizes, most = np.array([len(m) for m in members]), max(len(m) for m in members)
    table_GxF = np.stack([np.resize(m, most) for m in members])  # padded rows are never read
    g_BxG = rng.integers(len(members), size=(draws, len(members)))
    f_BxGxF = (rng.random((draws, len(members), most)) * sizes[g_BxG][..., None]).astype(int)
    return table_GxF[g_BxG[..., None], f_BxGxF].reshape(draws, -1)


def majority_baseline(task_dir: str, kind: str) -> float:
    """Dev score x 100 of always answering the training set's most frequent answer (label;
    "O" for every word, which scores entity F1 0; SQuAD's most frequent answer text). Not the
    baseline to beat: a constant fitted on another split can score below the best constant of
    the scored one (`best_constant`); kept for the tables' `majority` key."""
    from bert_jax.tasks import glue, squad, squad_eval

    if kind == "conll":
        return 0.0
    if kind == "squad":
        train = squad.load_dataset(f"{task_dir}/train-v1.1.json")
        answers = collections.Counter(
            qa["answers"][0]["text"]
            for article in train for p in article["paragraphs"] for qa in p["qas"]
        )  # fmt: skip
        dev = squad.load_dataset(f"{task_dir}/dev-v1.1.json")
        top = answers.most_common(1)[0][0]
        preds = {qa["id"]: top for a in dev for p in a["paragraphs"] for qa in p["qas"]}
        return float(squad_eval.evaluate_v1(dev, preds)["f1"])
    spec = glue.get_spec(kind)
    train = collections.Counter(ex.label for ex in glue.read_split(spec, task_dir, "train"))
    top = train.most_common(1)[0][0]
    dev = [ex.label for ex in glue.read_split(spec, task_dir, spec.dev_splits[0])]
    return 100.0 * sum(label == top for label in dev) / len(dev)


# The name a table's intervals give the best constant answer, set against arms as if an arm.
BEST_CONSTANT = "best constant"
HOLDS, REVERSED, UNRESOLVED = "holds", "reversed", "unresolved at this scale"
# An agreement claim whose interval is wider than twice its margin: it could not hold even if
# the arms were equal, so it is not a finding either way (the rule, not a measurement).
UNRESOLVABLE = "unresolvable at this scale (the interval is wider than the margin allows)"


def equivalence(diff: dict[str, float], margin: float) -> str:
    """An agreement claim, "A and B within `margin` points": *holds* when the whole interval
    lies within +-margin, *reversed* when it lies wholly beyond one side, *unresolvable* when
    it is wider than 2 x margin, else *unresolved*."""
    if diff["low"] > margin or diff["high"] < -margin:
        return REVERSED
    if diff["high"] - diff["low"] > 2 * margin:
        return UNRESOLVABLE
    if -margin <= diff["low"] and diff["high"] <= margin:
        return HOLDS
    return UNRESOLVED


def verdict(diff: dict[str, float], paper_effect: float | None = None) -> str:
    """*holds* when the interval lies above 0, *reversed* below; *unresolved at this scale* when
    it covers 0, or is wider than the paper's own effect (`paper_effect`, points) so that it
    could not have told the paper's finding from its absence (an unbounded interval, over one
    run, is always unresolved)."""
    if paper_effect is not None and diff["high"] - diff["low"] > abs(paper_effect):
        return UNRESOLVED
    if diff["low"] > 0:
        return HOLDS
    if diff["high"] < 0:
        return REVERSED
    return UNRESOLVED
