"""Shared by the train and eval readers: files per process, start-time checks, and turning parsed
records into the batch dict (dtypes, masking) and then into global `jax.Array`s."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import jax
import numpy as np
from etils import epath

from bert_jax import objectives
from bert_jax.errors import BertJaxError
from bert_jax.objectives.base import Objective
from bert_jax.objectives.masking import MaskingSpec, mask_batch
from bert_jax.shards.example import check_first_record
from bert_jax.shards.schema import Feature, Schema


def expand_files(files: str | Sequence[str]) -> list[str]:
    """Comma-separated string, glob, or list of either -> sorted, de-duplicated file names."""
    patterns = files.split(",") if isinstance(files, str) else list(files)
    found: set[str] = set()
    for pattern in (p.strip() for p in patterns):
        if not pattern:
            continue
        if any(c in pattern for c in "*?["):
            matches = _glob(pattern)
            if not matches:
                raise BertJaxError(f"{pattern}: no files match")
            found.update(matches)
        elif epath.Path(pattern).exists():
            found.add(pattern)
        else:
            raise BertJaxError(f"{pattern}: no such file")
    if not found:
        raise BertJaxError(f"no input files given ({files!r})")
    return sorted(found)


def _glob(pattern: str) -> list[str]:
    """Glob local or gs:// paths; wildcards may appear in any component after the first."""
    parts = pattern.split("/")
    first = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
    base = epath.Path("/".join(parts[:first]) or ".")
    try:
        return [str(p) for p in base.glob("/".join(parts[first:])) if p.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def process_files(
    all_files: list[str],
    process_index: int | None,
    process_count: int | None,
    sharding: jax.sharding.NamedSharding | None,
    allow_idle: bool = False,
) -> tuple[list[str], int, int]:
    """This process's files (round-robin over the sorted list) and the process index and count.
    `allow_idle`: a process may get no file (eval, where such a process yields padding)."""
    index = jax.process_index() if process_index is None else process_index
    count = jax.process_count() if process_count is None else process_count
    if sharding is not None and count != jax.process_count():
        raise BertJaxError(
            f"process_count={count} but JAX runs {jax.process_count()} processes: simulated "
            "processes (process_index/process_count overrides) need sharding=None"
        )
    if not 0 <= index < count:
        raise BertJaxError(f"process_index {index} is not in [0, process_count={count})")
    if len(all_files) < count and not allow_idle:
        raise BertJaxError(
            f"{len(all_files)} input files for {count} processes: each process reads whole "
            f"files, so write at least {count} shards (a multiple of {count} balances the load)"
        )
    return all_files[index::count], index, count


def data_parallel_size(sharding: jax.sharding.NamedSharding | None) -> int:
    """Product of the mesh axis sizes that shard the batch dimension (spec[0])."""
    if sharding is None or not sharding.spec:
        return 1
    axes = sharding.spec[0]
    if axes is None:
        return 1
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    return math.prod(sharding.mesh.shape[a] for a in axes)


def per_process_batch_size(
    global_batch_size: int, process_count: int, sharding: jax.sharding.NamedSharding | None
) -> int:
    if global_batch_size % process_count:
        raise BertJaxError(
            f"global_batch_size {global_batch_size} is not divisible by the process count "
            f"{process_count}"
        )
    dp = data_parallel_size(sharding)
    if global_batch_size % dp:
        raise BertJaxError(
            f"global_batch_size {global_batch_size} is not divisible by the data-parallel size "
            f"{dp} (mesh axes {sharding.spec[0]!r} of {dict(sharding.mesh.shape)})"
        )
    return global_batch_size // process_count


ID_FEATURES = ("input_ids", "masked_lm_ids")


def check_ids(
    features: dict[str, np.ndarray], vocab_size: int | None, where: str, vocab_hint: str = ""
) -> None:
    """Token ids outside [0, vocab_size) index past the embedding table: on the accelerator that
    is a NaN (or a silently clamped row), not an error, so they are refused here."""
    if not vocab_size:
        return
    for key in ID_FEATURES:
        ids = features.get(key)
        if ids is None or not ids.size:
            continue
        lo, hi = int(ids.min()), int(ids.max())
        if hi >= vocab_size or lo < 0:
            bad = hi if hi >= vocab_size else lo
            raise BertJaxError(
                f"{where}: {key} has token id {bad}, outside the vocab's [0, {vocab_size}) "
                f"{vocab_hint}(shards written with another vocab, or a corrupt record)"
            )


def check_shard_vocab(files: list[str], vocab_size: int | None, vocab_hint: str = "") -> None:
    """The stats.json create-pretraining-data writes beside the shards records the vocab size it
    used; a smaller table here cannot hold the shards' ids."""
    if not vocab_size:
        return
    import json

    for d in sorted({str(epath.Path(f).parent) for f in files}):
        stats = epath.Path(d) / "stats.json"
        if not stats.exists():
            continue
        try:
            saved = json.loads(stats.read_text()).get("settings", {}).get("vocab_size")
        except (json.JSONDecodeError, AttributeError):
            continue
        # Larger is allowed: a table padded past the vocab (e.g. to a multiple of 128).
        if saved is not None and int(saved) > vocab_size:
            raise BertJaxError(
                f"{stats}: the shards were written with a {saved}-token vocab, this run's vocab "
                f"has {vocab_size} {vocab_hint}(use the vocab_file the shards were made with)"
            )


# The config key that sets each BERT feature's length: shards without a stats.json (written
# elsewhere) are matched by naming it when their first record has another length.
_LENGTH_KEYS = {
    **dict.fromkeys(("input_ids", "input_mask", "segment_ids"), "max_seq_length"),
    **dict.fromkeys(("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"),
                    "max_predictions_per_seq"),
}  # fmt: skip


def _with_length_flag(e: BertJaxError) -> BertJaxError:
    found = re.search(r"feature '(\w+)' has length (\d+), expected (\d+)$", str(e))
    if not found or found.group(1) not in _LENGTH_KEYS:
        return e
    key, theirs, ours = _LENGTH_KEYS[found.group(1)], found.group(2), found.group(3)
    return BertJaxError(
        f"{e}: add --config.{key}={theirs}, or rewrite the shards with "
        f"create-pretraining-data --{key}={ours}"
    )


# The features of statically masked shards (create-pretraining-data without --dynamic_masking).
STATIC_MASKS = (("masked_lm_positions", "int64"), ("masked_lm_ids", "int64"),
                ("masked_lm_weights", "float32"))  # fmt: skip


def reads_unmasked_text(objective: Objective, masking: MaskingSpec | None) -> bool:
    """Whether a run reads the original text, not the shards' static masks: dynamic masking
    draws its own masks, and an objective without masked LM (ltr, permutation_lm) predicts the
    text itself; trained on [MASK]s, a left-to-right LM learns to write [MASK]."""
    return masking is not None or objective.masking is None


def _packing(features: dict[str, np.ndarray]) -> int:
    """Instances per row of a decoded record: 1 unpacked, else its next_sentence_labels."""
    return int(features["next_sentence_labels"].size) if "pack_ids" in features else 1


def _check_same_packing(first_path: str, first: dict[str, np.ndarray], path: str) -> None:
    """A later file that fails the first file's schema because it is packed otherwise is named as
    such, not by the length of one feature (called only once it failed: files that agree cost
    no extra read)."""
    from bert_jax.shards.example import decode
    from bert_jax.shards.tfrecord import RecordReader

    try:
        with RecordReader(path, chunk_bytes=1 << 16) as reader:
            features = decode(next(reader))
        theirs, ours = _packing(features), _packing(first)
    except Exception:  # unreadable or not our records: the schema's own error says so
        return
    if theirs == ours:
        return
    if min(theirs, ours) > 1:
        raise BertJaxError(
            f"the files mix shards packed with pack_sequences {ours} and {theirs}: {first_path} "
            f"and {path}; train on one kind, or rewrite them all with one create-pretraining-data "
            "--pack_sequences"
        )
    packed, unpacked = (path, first_path) if theirs > 1 else (first_path, path)
    n = max(theirs, ours)
    raise BertJaxError(
        f"the files mix packed and unpacked shards: {packed} (pack_sequences={n}) and {unpacked} "
        "(unpacked); train on one kind, or rewrite the unpacked ones with "
        f"create-pretraining-data --pack_sequences={n}"
    )


def check_files(
    files: list[str], schema: Schema, unmasked_text: bool, vocab_size: int | None = None
) -> Schema:
    """Check each file's first record against `schema`; returns the schema to decode. With
    `unmasked_text` (`reads_unmasked_text`) and statically masked shards that is `schema` plus
    their masks, whose masked_lm_ids hold every token [MASK] (or a random id) replaced:
    `finish_batch` puts them back (`restore_text`), so such a run reads the original text."""
    read = schema
    first: dict[str, np.ndarray] = {}
    for i, path in enumerate(files):
        try:
            features = check_first_record(path, read)
        except BertJaxError as e:
            if first:
                _check_same_packing(files[0], first, path)
            raise _with_length_flag(e) from None
        first = first or features
        check_ids(features, vocab_size, f"{path}: record 0")
        if i == 0 and unmasked_text and "masked_lm_positions" in features:
            length = int(features["masked_lm_positions"].size)
            read = schema + tuple(Feature(n, length, t) for n, t in STATIC_MASKS)
    return read


class Reader:
    """The start-up PretrainInput and EvalInput share: their settings, this process's files and
    the checks on them, which raise in the order the package docstring lists them."""

    files: list[str]  # this process's
    process_index: int
    process_count: int
    global_batch_size: int
    batch_size: int  # per process
    max_seq_length: int
    max_predictions_per_seq: int
    seed: int
    sharding: jax.sharding.NamedSharding | None
    dynamic_masking: MaskingSpec | None
    objective: Objective
    pack_sequences: int
    vocab_size: int | None  # token ids are checked against it at start-up and in every batch
    _schema: Schema  # to decode

    def _setup(
        self,
        files: str | Sequence[str],
        global_batch_size: int,
        max_seq_length: int,
        max_predictions_per_seq: int,
        *,
        seed: int,
        sharding: jax.sharding.NamedSharding | None,
        dynamic_masking: MaskingSpec | None,
        objective: str,
        process_index: int | None,
        process_count: int | None,
        vocab_size: int | None,
        pack_sequences: int,
        allow_idle: bool = False,
    ) -> list[str]:
        """Sets the attributes above; returns every process's files (sorted)."""
        all_files = expand_files(files)
        self.files, self.process_index, self.process_count = process_files(
            all_files, process_index, process_count, sharding, allow_idle
        )
        self.global_batch_size = global_batch_size
        self.batch_size = per_process_batch_size(global_batch_size, self.process_count, sharding)
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.seed = seed
        self.sharding = sharding
        self.dynamic_masking = dynamic_masking
        self.objective = objectives.get(objective)
        unmasked = reads_unmasked_text(self.objective, dynamic_masking)
        # Packed shards (create-pretraining-data --pack_sequences=S): S instances per record.
        self.pack_sequences = objectives.check_pack_sequences(self.objective.name, pack_sequences)
        schema = self.objective.shard_schema(
            max_seq_length, max_predictions_per_seq, not unmasked, pack_sequences
        )
        self.vocab_size = vocab_size
        check_shard_vocab(self.files, vocab_size)
        # Statically masked shards read for their text add their masks (to restore it).
        self._schema = check_files(self.files, schema, unmasked, vocab_size)
        return all_files


def restore_text(batch: dict[str, np.ndarray], where: str = "") -> None:
    """Statically masked records -> their original tokens, in place: input_ids at each
    predicted position (masked_lm_weights > 0) is set back to its masked_lm_ids entry; the
    static masks are dropped (the run draws its own, or predicts the text)."""
    positions = batch.pop("masked_lm_positions")
    ids = batch.pop("masked_lm_ids")
    weights = batch.pop("masked_lm_weights")
    rows, slots = np.nonzero(weights > 0)
    at = positions[rows, slots]
    input_ids = np.array(batch["input_ids"], copy=True)
    if at.size and (at.min() < 0 or at.max() >= input_ids.shape[1]):
        raise BertJaxError(f"{where}: masked_lm_positions outside the sequence (a corrupt record)")
    input_ids[rows, at] = ids[rows, slots]
    batch["input_ids"] = input_ids


def finish_batch(
    parsed: dict[str, np.ndarray],
    objective: Objective,
    example_index_B: np.ndarray,
    masking: MaskingSpec | None,
    max_predictions_per_seq: int,
    seed: int,
    example_mask_B: np.ndarray | None = None,
    pack_sequences: int = 1,
) -> dict[str, np.ndarray]:
    """Parsed int64/float32 features -> the objective's batch arrays (masked when `masking`
    is given, int32 ids, [B] labels, example_mask)."""
    batch = dict(parsed)
    if "masked_lm_positions" in batch and reads_unmasked_text(objective, masking):
        restore_text(batch)  # static masks under dynamic masking, ltr or XLNet: the text
    if objective.layout is not None:  # e.g. XLNet's layout, targets and permutation masks
        words = () if masking is None else masking.continuation_ids
        batch.update(
            objective.layout.apply(batch, example_index_B, max_predictions_per_seq, seed, words)
        )
    elif masking is not None:
        batch.update(
            mask_batch(
                batch["input_ids"],
                batch["input_mask"],
                example_index_B,
                masking,
                max_predictions_per_seq,
                seed,
            )
        )
    n = batch["input_ids"].shape[0]
    batch["example_mask"] = np.ones((n,)) if example_mask_B is None else example_mask_B
    length, predictions = batch["input_ids"].shape[1], max_predictions_per_seq
    out = {
        key: batch[key].astype(dtype).reshape(shape)
        for key, (shape, dtype) in objective.batch_shapes(
            n, length, predictions, pack_sequences
        ).items()
    }
    if example_mask_B is not None and "masked_lm_weights" in out:  # padding: no MLM weight
        out["masked_lm_weights"] *= out["example_mask"][:, None]
    return out


def to_global(
    batch: dict[str, np.ndarray],
    sharding: jax.sharding.NamedSharding | None,
    global_batch_size: int,
) -> dict[str, jax.Array] | dict[str, np.ndarray]:
    """This process's rows -> global arrays sharded over the batch dim (sharding.spec[0])."""
    if sharding is None:
        return batch
    batch_axes = sharding.spec[0] if sharding.spec else None
    batch_sharding = jax.NamedSharding(sharding.mesh, jax.P(batch_axes))
    return {
        key: jax.make_array_from_process_local_data(
            batch_sharding, value, (global_batch_size, *value.shape[1:])
        )
        for key, value in batch.items()
    }
