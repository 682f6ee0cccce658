"""Counters for stats.json: mergeable across blocks, workers and Beam bundles."""

from __future__ import annotations

import json

import numpy as np

from bert_jax import objectives
from bert_jax.data.instances import Instance, InstanceConfig, num_to_predict

COUNTERS = (
    "instances",
    "tokens",
    "masked_positions",
    "mask_token",
    "random_token",
    "kept_token",
    "label_1",
    "capped_instances",
    "documents",
    "sentences",
    "lines",
    "empty_token_lines",
    "invalid_utf8_lines",
    "long_lines_split",
    "text_bytes",
    "records",  # rows written: the instances, or fewer when packed (--pack_sequences)
)


def new_stats(max_seq_length: int) -> dict:
    return {**{k: 0 for k in COUNTERS}, "lengths": [0] * (max_seq_length + 1)}


def add_instance(stats: dict, inst: Instance, cfg: InstanceConfig) -> None:
    n = len(inst.input_ids)
    stats["instances"] += 1
    stats["records"] += 1
    stats["tokens"] += n
    stats["lengths"][n] += 1
    stats["label_1"] += inst.next_sentence_label
    if not cfg.dynamic_masking:
        stats["masked_positions"] += len(inst.masked_lm_positions)
        m, r, k = inst.mask_kinds
        stats["mask_token"] += m
        stats["random_token"] += r
        stats["kept_token"] += k
        if round(n * cfg.masked_lm_prob) > num_to_predict(n, cfg):
            stats["capped_instances"] += 1


def merge(a: dict, b: dict) -> dict:
    out = {k: a[k] + b[k] for k in COUNTERS}
    out["lengths"] = [x + y for x, y in zip(a["lengths"], b["lengths"], strict=True)]
    return out


def summarize(stats: dict, cfg: InstanceConfig, extra: dict | None = None) -> dict:
    """The stats.json content: raw counts plus the derived fractions and a length histogram."""
    n, max_len, records = stats["instances"], cfg.max_seq_length, stats["records"]
    lengths = np.asarray(stats["lengths"])
    edges = np.linspace(0, max_len, 9).round().astype(int)
    edges[-1] = max_len + 1
    counts = [int(lengths[lo:hi].sum()) for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    label_name = objectives.get(cfg.objective).label_statistic
    summary = {
        "instances": n,
        "tokens": stats["tokens"],
        # Of the records' token slots (packed records hold several instances).
        "padding_fraction": 1.0 - stats["tokens"] / (records * max_len) if records else 0.0,
        "mean_length": stats["tokens"] / n if n else 0.0,
        "masked_fraction": stats["masked_positions"] / stats["tokens"] if stats["tokens"] else 0.0,
        "masked_positions": stats["masked_positions"],
        "mask_token_count": stats["mask_token"],
        "random_token_count": stats["random_token"],
        "kept_token_count": stats["kept_token"],
        label_name: stats["label_1"] / n if n else 0.0,
        "capped_instances": stats["capped_instances"],
        "length_histogram": {
            "bin_edges": [int(e) for e in edges[:-1]] + [max_len],
            "counts": counts,
        },
        **{k: stats[k] for k in COUNTERS[8:]},
    }
    if extra:
        summary.update(extra)
    return summary


def dumps(summary: dict) -> str:
    return json.dumps(summary, indent=2, sort_keys=False) + "\n"
