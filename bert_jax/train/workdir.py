"""A workdir's config.json: the run's config (plus e.g. the model's BertConfig under "bert"), which
`restore_params` and `load_pretrained` trust to describe the checkpoints beside it. A rerun in a
workdir that has a checkpoint resumes it, so its config must be the checkpointed run's: only the
keys in RESUMABLE (how often to log, evaluate and save, where to export, the device layout) may
change. Anything else is refused before config.json is touched.

    record = config_record(config, {"bert": bert_config.to_dict()})
    check_resume(workdir, record)      # only when the workdir has a checkpoint
    write_config(workdir, record)      # process 0
"""

from __future__ import annotations

import json
from typing import Any

import jax
from etils import epath

from bert_jax.atomic_write import write_json_atomic
from bert_jax.errors import BertJaxError

# Keys that do not change what the checkpoint holds or how training continues from it. File
# locations are here because the same data or checkpoint may be reached by another path; the
# input pipeline's own state check refuses different shards.
RESUMABLE = frozenset(
    {
        "log_every_steps", "eval_every_steps", "checkpoint_every_steps", "keep_checkpoints",
        "keep_checkpoint_every_steps", "async_checkpoints", "max_eval_steps", "eval_files",
        "eval_batch_size", "export_hf_dir", "max_nonfinite_steps", "distributed", "mesh",
        "num_devices", "train_files", "vocab_file", "init_checkpoint", "data_dir",
        "tfds_dir",
    }
)  # fmt: skip


def config_record(config: Any, extra: dict | None = None) -> dict:
    """The JSON form of a run's config as config.json stores it."""
    d = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    d.update(extra or {})
    return json.loads(json.dumps(d, sort_keys=True, default=str))


def _flat(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def differing_keys(saved: dict, now: dict) -> list[str]:
    """Dotted keys, in both records and not RESUMABLE, whose values differ (keys only one side
    has come from another bert-jax version and are not compared)."""
    a, b = _flat(saved), _flat(now)
    return sorted(
        k for k in a.keys() & b.keys() if k.split(".")[0] not in RESUMABLE and a[k] != b[k]
    )


def check_resume(workdir: epath.Path, record: dict) -> None:
    path = workdir / "config.json"
    if not path.exists():
        return  # a checkpoint without config.json: nothing to compare with
    try:
        saved = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BertJaxError(f"{path}: not valid JSON ({e})") from e
    diff = differing_keys(saved, record)
    if diff:
        a, b = _flat(saved)[diff[0]], _flat(record)[diff[0]]
        raise BertJaxError(
            f"{path}: this rerun's config differs from the checkpointed run's in "
            f"{', '.join(diff)} ({diff[0]}: {a!r} saved, {b!r} now); rerun with the same config "
            f"to resume, or use a new workdir (init_checkpoint={workdir} starts from its weights)"
        )


def write_config(workdir: epath.Path, record: dict) -> None:
    if jax.process_index() != 0:
        return
    workdir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(workdir / "config.json", record, sort_keys=True)
