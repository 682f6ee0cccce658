"""`bert-jax demo`'s workdir across reruns: what each flag shapes, and deleting what a changed flag
made stale so the rerun rebuilds it (the rest is reused, and the demo says which)."""

from __future__ import annotations

import json
import pathlib
import shutil

from bert_jax.atomic_write import write_text_atomic

SETTINGS_FILE = "demo_settings.json"
# What each flag shapes, in pipeline order: changing it rebuilds these and everything after.
STAGES = ("corpus", "vocab", "shards", "pretraining")
_FIRST_STAGE = {"corpus": "corpus", "corpus_mb": "corpus", "vocab_size": "vocab",
                "max_seq_length": "shards", "train_steps": "pretraining",
                "objective": "pretraining"}  # fmt: skip
# Settings added after workdirs were recorded without them: what those workdirs were built with.
_RECORDED_BEFORE = {"corpus": "embedded", "objective": "mlm_nsp"}


def _stage_paths(root: pathlib.Path) -> dict[str, list[pathlib.Path]]:
    data = root / "data"
    return {
        "corpus": [data / "corpus.txt", data / "train.txt", data / "eval.txt"],
        "vocab": [data / "vocab"],
        "shards": [data / "train", data / "eval"],
        "pretraining": [root / "pretrain", root / "loss_curve.png"],
    }


def refresh_workdir(root: pathlib.Path, settings: dict) -> tuple[dict, list[str]]:
    """Compare `settings` with the ones the workdir's artefacts were built with; delete the stale
    artefacts (the first stage a changed flag shapes and every later one) and record `settings`.
    Returns ({flag: (old, new)}, stages rebuilt). A workdir without a record is rebuilt whole."""
    record = root / "data" / SETTINGS_FILE
    paths = _stage_paths(root)
    built = any(p.exists() for ps in paths.values() for p in ps)
    old = json.loads(record.read_text()) if record.exists() else None
    if old is None:
        changed = {k: (None, v) for k, v in settings.items()} if built else {}
    else:
        old = {**_RECORDED_BEFORE, **old}
        changed = {k: (old.get(k), v) for k, v in settings.items() if old.get(k) != v}
    first = min((STAGES.index(_FIRST_STAGE[k]) for k in changed), default=len(STAGES))
    stale = [stage for stage in STAGES[first:] if any(p.exists() for p in paths[stage])]
    for stage in stale:
        for p in paths[stage]:
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    record.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(record, json.dumps(settings, sort_keys=True) + "\n")
    return changed, stale
