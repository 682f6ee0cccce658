"""The shards against the run: create-pretraining-data records its settings in a stats.json
beside the shards (or in the --output_dir above them). Before anything is built:

- `check_shard_objective`: shards written for an objective the run cannot read (T5 shards in a
  BERT config, NSP pairs under an SOP head, ...) are refused naming both objectives and a fix
  that works in the config's family;
- `with_shard_geometry`: a max_seq_length / max_predictions_per_seq / pack_sequences the config
  leaves unset (None, as pretrain_cpu.py) is the shards' own, from stats.json or their first
  record (pack_sequences: 1 when neither says);
- `check_shard_geometry`: a geometry the config sets and the shards do not have is refused, with
  the exact flags that fix it either way.

A run reads its shards' stats.json once (`read_run_shards`) and hands the result to every check
(here, the vocabulary checks of the model config, the teacher and T5); each check reads them
itself only when called on its own (`shards=None`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from etils import epath

from bert_jax import objectives
from bert_jax.errors import BertJaxError
from bert_jax.input.batches import expand_files
from bert_jax.objectives.base import Objective

GEOMETRY = ("max_seq_length", "max_predictions_per_seq", "pack_sequences")
# Shards whose stats.json and first record do not say (written before packing existed): unpacked.
_DEFAULTS = {"pack_sequences": 1}


def shard_settings(files: str) -> tuple[epath.Path, dict[str, Any]] | None:
    """(stats.json, its `settings`) of the create-pretraining-data run that wrote the first shard
    `files` names, or None when no stats.json lists it (shards from elsewhere)."""
    first = epath.Path(expand_files(files)[0])
    for folder in (first.parent, first.parent.parent):
        path = folder / "stats.json"
        if not path.exists():
            continue
        try:
            stats = json.loads(path.read_text())
        except (json.JSONDecodeError, OSError):
            continue  # not ours to judge here; the run reads the shards themselves
        names = {epath.Path(f).name for f in stats.get("output_files", [])}
        if first.name in names and isinstance(stats.get("settings"), dict):
            return path, stats["settings"]
    return None


@dataclass(frozen=True)
class ShardStats:
    """What create-pretraining-data recorded for one of the run's file sets."""

    key: str  # the config key that names the files: train_files or eval_files
    path: epath.Path  # their stats.json
    settings: dict[str, Any]


RunShards = tuple[ShardStats, ...]


def read_run_shards(config: Any) -> RunShards:
    """The stats.json records of the run's train and eval shards that have one."""
    found = []
    for key in ("train_files", "eval_files"):
        # a config mapping, or a typed view of one (bert_jax.pretraining.settings)
        files = config.get(key) if hasattr(config, "get") else getattr(config, key, None)
        if files:
            record = shard_settings(files)
            if record is not None:
                found.append(ShardStats(key, *record))
    return tuple(found)


def run_shards(config: Any, shards: RunShards | None) -> RunShards:
    """`shards` as the run read them, or read now for a check called on its own."""
    return read_run_shards(config) if shards is None else shards


def train_record(config: Any, shards: RunShards | None) -> ShardStats | None:
    """The train shards' record among the run's (`run_shards`), None when they have none."""
    return next((r for r in run_shards(config, shards) if r.key == "train_files"), None)


# create-pretraining-data --objective for an objective without a data flag of its own: its pairing.
_PAIRING_FLAG = {"sentence_pairs": "nsp", "swapped_pairs": "sop", "packed": "full_sentences",
                 "packed_docs": "doc_sentences"}  # fmt: skip


def data_flag(objective: str) -> str:
    """The create-pretraining-data --objective whose shards serve `objective`."""
    spec = objectives.get(objective)
    if spec.data_flag:
        return spec.data_flag
    return _PAIRING_FLAG[spec.pairing] if isinstance(spec, Objective) else spec.name


def _readable(run: Any, shards: Any) -> bool:
    """Whether a run of objective `run` reads shards written for `shards`: the same family of
    records (BERT's input_ids... or T5's inputs/targets), and the same pairs when the run has a
    sentence head (its label means what the pairing made it mean)."""
    if run.name == shards.name:
        return True
    if isinstance(run, Objective) != isinstance(shards, Objective):
        return False
    if not isinstance(run, Objective):
        return False  # span corruption and prefix LM shards hold other targets
    return run.sentence_head is None or run.pairing == shards.pairing


def _objective_fix(run: Any, shards: Any, settings: dict[str, Any]) -> str:
    write = f"create-pretraining-data --objective={data_flag(run.name)}"
    if isinstance(run, Objective) and not isinstance(shards, Objective):
        spm = settings.get("spm_model", "<the shards' spm_model>")
        return (f"these are T5 shards: train them with --config t5.py:<preset> "
                f"--config.objective={shards.name} --config.spm_model={spm}, or write shards "
                f"for this run with {write}")  # fmt: skip
    if not isinstance(run, Objective) and isinstance(shards, Objective):
        return (f"these are BERT shards: train them with --config pretrain.py:<preset> "
                f"--config.objective={shards.name}, or write shards for this T5 run with "
                f"{write} --spm_model=<this config's spm_model>")  # fmt: skip
    return f"add --config.objective={shards.name}, or rewrite the shards with {write}"


def check_shard_objective(config: Any, shards: RunShards | None = None) -> None:
    """Raise naming both objectives when the shards' stats.json says they were written for an
    objective this run cannot read (not a vocabulary or length error further on)."""
    if not config.get("objective"):
        return
    run = objectives.get(config.objective)
    for record in run_shards(config, shards):
        settings = record.settings
        if not settings.get("objective"):
            continue  # an older stats.json
        try:
            theirs = objectives.get(settings["objective"])
        except BertJaxError:
            continue  # an objective this version does not know: the reader judges the records
        if _readable(run, theirs):
            continue
        raise BertJaxError(
            f"{config[record.key]}: the shards were written for objective {theirs.name} "
            f"({record.path}), this run's config.objective is {run.name}: "
            f"{_objective_fix(run, theirs, settings)}"
        )


def _first_record_lengths(files: str) -> dict[str, int]:
    """The geometry of shards without a stats.json, read off their first record."""
    from bert_jax.shards.example import decode
    from bert_jax.shards.tfrecord import RecordReader

    path = expand_files(files)[0]
    with RecordReader(path, chunk_bytes=1 << 16) as reader:
        first = next(reader, None)
    if first is None:
        raise BertJaxError(f"{path}: no records (empty TFRecord file)")
    features = decode(first)
    lengths = {"max_seq_length": "input_ids", "max_predictions_per_seq": "masked_lm_positions"}
    found = {k: int(features[f].size) for k, f in lengths.items() if f in features}
    if "pack_ids" in features:  # one sentence label per instance slot
        found["pack_sequences"] = int(features["next_sentence_labels"].size)
    return found


def with_shard_geometry(config: Any, shards: RunShards | None = None) -> Any:
    """`config`, or a copy of it with the geometry keys it leaves unset (None) filled in from the
    train shards: their stats.json, else their first record. A key the config sets is kept (and
    checked against the shards by `check_shard_geometry`)."""
    unset = [k for k in GEOMETRY if config.get(k, 0) is None]
    if not unset:
        return config
    found: dict[str, Any] = {}
    where = "the shards"
    if config.get("train_files"):
        train = train_record(config, shards)
        if train is not None:
            found, where = train.settings, str(train.path)
        else:
            found, where = _first_record_lengths(config.train_files), "their first record"
    config = config.copy_and_resolve_references()
    found = {**_DEFAULTS, **{k: v for k, v in found.items() if v is not None}}
    for key in unset:
        if found.get(key) is None:
            raise BertJaxError(
                f"config.{key} is not set and the shards do not give it ({where}): add "
                f"--config.{key}=N, the create-pretraining-data --{key} they were written with"
            )
        config[key] = int(found[key])
    return config


def check_shard_geometry(config: Any, shards: RunShards | None = None) -> None:
    """Raise naming the flags when the run's geometry is not the shards'."""
    for k in GEOMETRY:  # before comparing: a rewrite with a value below 1 is no fix to offer
        if config.get(k) is not None and int(config.get(k)) < 1:
            raise BertJaxError(f"config.{k}={config.get(k)}: must be >= 1")
    masking = objectives.get(config.objective).masking if config.get("objective") else True
    for record in run_shards(config, shards):
        key, path, settings = record.key, record.path, record.settings
        checked = GEOMETRY
        if settings.get("dynamic_masking") or config.get("dynamic_masking") or masking is None:
            # masks are drawn at training time, or the objective reads none (ltr, XLNet)
            checked = ("max_seq_length", "pack_sequences")
        wrong = [k for k in checked
                 if k in settings and config.get(k) is not None and settings[k] != config.get(k)]
        if not wrong:
            continue
        theirs = " ".join(f"--config.{k}={settings[k]}" for k in wrong)
        ours = " ".join(f"--{k}={config.get(k)}" for k in wrong)
        have = ", ".join(f"{k}={config.get(k)}" for k in wrong)
        raise BertJaxError(
            f"{config[key]}: the shards have {', '.join(f'{k}={settings[k]}' for k in wrong)} "
            f"({path}), this run {have}: add {theirs}, or rewrite the shards with "
            f"create-pretraining-data {ours}"
        )
