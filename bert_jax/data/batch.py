"""Fast mode's vectorised back end: a block's instances as padded numpy arrays, masked by the
one masker (`bert_jax.objectives.masking`) and serialised to `tf.train.Example` bytes without a
per-token Python loop (`columns` -> `bert_jax.shards.example.encode_batch`).
"""

from __future__ import annotations

import itertools
import random

import numpy as np

from bert_jax.data.instances import Instance, InstanceConfig, Vocab
from bert_jax.data.row_packing import assign_rows, place_rows
from bert_jax.objectives.base import TokenMasking
from bert_jax.objectives.masking import MaskingSpec, mask_batch


def pack(instances: list[Instance], cfg: InstanceConfig) -> dict[str, np.ndarray]:
    """Unmasked instances -> input_ids/segment_ids [N, L] (0-padded), lengths, labels."""
    n, seq = len(instances), cfg.max_seq_length
    lengths_N = np.fromiter((len(i.input_ids) for i in instances), np.int64, n)
    valid_NxL = np.arange(seq)[None, :] < lengths_N[:, None]
    ids_NxL = np.zeros((n, seq), np.int64)
    seg_NxL = np.zeros((n, seq), np.int64)
    ids_NxL[valid_NxL] = np.fromiter(
        itertools.chain.from_iterable(i.input_ids for i in instances), np.int64
    )
    seg_NxL[valid_NxL] = np.fromiter(
        itertools.chain.from_iterable(i.segment_ids for i in instances), np.int64
    )
    labels_N = np.fromiter((i.next_sentence_label for i in instances), np.int64, n)
    return {"input_ids": ids_NxL, "segment_ids": seg_NxL, "lengths": lengths_N, "labels": labels_N}


def pack_rows(batch: dict, max_sequences: int, rng: random.Random) -> dict[str, np.ndarray]:
    """A block's padded instances -> rows of up to `max_sequences` instances back to back
    (best-fit decreasing, `bert_jax.data.row_packing`), the rows shuffled by `rng` so
    that record order does not follow length. Adds `pack_ids` [R, L] (1..S, 0 on padding);
    `lengths` becomes the row's real tokens, `labels` [R, S] (0 in an empty slot). Masking runs
    on the rows afterwards, at the same rate over their real tokens."""
    lengths_N = batch["lengths"]
    rows = assign_rows(lengths_N, batch["input_ids"].shape[1], max_sequences)
    rng.shuffle(rows)
    tokens = {k: batch[k] for k in ("input_ids", "segment_ids")}
    out, pack_ids = place_rows(rows, lengths_N, tokens)
    labels_RxS = np.zeros((len(rows), max_sequences), np.int64)
    for row, members in enumerate(rows):
        labels_RxS[row, : len(members)] = batch["labels"][members]
    lengths_R = np.array([int(lengths_N[m].sum()) for m in rows], np.int64)
    pack_ids = pack_ids.astype(np.int64)
    return {**out, "pack_ids": pack_ids, "lengths": lengths_R, "labels": labels_RxS}


def masking_spec(vocab: Vocab, rule: TokenMasking, cfg: InstanceConfig) -> MaskingSpec:
    """The masker's view of a WordPiece vocab: never [CLS]/[SEP] (padding lies past the length),
    random replacements from every id, "##" pieces for whole-word masking."""
    return MaskingSpec(
        mask_id=vocab.mask_id,
        vocab_size=int(vocab.vocab_ids.max()) + 1,
        special_ids=(vocab.cls_id, vocab.sep_id),
        masked_lm_prob=cfg.masked_lm_prob,
        mask_prob=rule.mask_prob if cfg.mask_prob is None else cfg.mask_prob,
        random_prob=rule.random_prob if cfg.random_prob is None else cfg.random_prob,
        continuation_ids=tuple(np.flatnonzero(vocab.is_continuation).tolist()),
        whole_word=cfg.do_whole_word_mask,
        max_ngram=1 if cfg.do_whole_word_mask else rule.max_ngram,
    )


def mask(batch: dict, spec: MaskingSpec, max_predictions_per_seq: int, seed: int) -> None:
    """Masks the packed rows in place with the one masker (row r is example r of the block):
    masked input_ids, masked_lm_positions/ids [N, P], num_masked [N], kinds [3]."""
    ids_NxL, lengths_N = batch["input_ids"], batch["lengths"]
    valid_NxL = np.arange(ids_NxL.shape[1])[None, :] < lengths_N[:, None]
    rows_N = np.arange(len(ids_NxL))
    out = mask_batch(ids_NxL, valid_NxL, rows_N, spec, max_predictions_per_seq, seed)
    batch.update(
        input_ids=out["input_ids"],
        masked_lm_positions=out["masked_lm_positions"],
        masked_lm_ids=out["masked_lm_ids"],
        num_masked=out["masked_lm_weights"].sum(axis=1).astype(np.int64),
        kinds=out["mask_kinds"],
    )


def columns(batch: dict, cfg: InstanceConfig) -> dict[str, np.ndarray]:
    """The shard columns of packed (and masked) rows, in the reference's feature order, for
    `bert_jax.shards.example.encode_batch`: input_mask from the lengths, masked_lm_weights from
    the mask counts, the label as a [N, 1] column."""
    seq = batch["input_ids"].shape[1]
    out = {
        "input_ids": batch["input_ids"],
        "input_mask": (np.arange(seq)[None, :] < batch["lengths"][:, None]).astype(np.int64),
        "segment_ids": batch["segment_ids"],
    }
    if "pack_ids" in batch:
        out["pack_ids"] = batch["pack_ids"]
    if not cfg.dynamic_masking:
        preds = cfg.max_predictions_per_seq
        out["masked_lm_positions"] = batch["masked_lm_positions"]
        out["masked_lm_ids"] = batch["masked_lm_ids"]
        weights_NxP = np.arange(preds)[None, :] < batch["num_masked"][:, None]
        out["masked_lm_weights"] = weights_NxP.astype(np.float32)
    labels = batch["labels"]
    out["next_sentence_labels"] = labels if labels.ndim == 2 else labels[:, None]
    return out


def add_instance_stats(st: dict, batch: dict, cfg: InstanceConfig) -> None:
    """The per-instance counters, from a block's instances before packing."""
    lengths_N = batch["lengths"]
    st["instances"] += len(lengths_N)
    st["tokens"] += int(lengths_N.sum())
    st["label_1"] += int(batch["labels"].sum())
    counts = np.bincount(lengths_N, minlength=cfg.max_seq_length + 1)
    st["lengths"] = [a + int(b) for a, b in zip(st["lengths"], counts, strict=True)]


def add_record_stats(st: dict, batch: dict, cfg: InstanceConfig) -> None:
    """The per-record counters (masks are drawn per record), from the rows written."""
    lengths_N = batch["lengths"]
    st["records"] += len(lengths_N)
    if not cfg.dynamic_masking:
        st["masked_positions"] += int(batch["num_masked"].sum())
        kinds = ("mask_token", "random_token", "kept_token")
        for key, v in zip(kinds, batch["kinds"], strict=True):
            st[key] += int(v)
        wanted_N = np.round(lengths_N * cfg.masked_lm_prob)
        st["capped_instances"] += int((wanted_N > cfg.max_predictions_per_seq).sum())
