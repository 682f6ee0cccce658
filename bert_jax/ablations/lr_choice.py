"""Fine-tuning learning rates chosen on a slice of train, never on dev: each arm's rate for a
task is the one of the scale's candidates (`Scale.finetune_lrs`) whose run, trained on the first
80% of the task's training examples, scores best on the other 20%. The slice is cut at the end,
and the suite's examples follow their documents, so the held 20% comes mostly from documents the
80% does not, as dev does.

    write_train_slice("conll", "W/suite/conll", "W/lr_slices/conll")   # the layout, re-split
"""

from __future__ import annotations

import json

from etils import epath

from bert_jax.ablations.inputs import FAMILY
from bert_jax.atomic_write import write_text_atomic
from bert_jax.errors import BertJaxError
from bert_jax.train.config import finetune_config

HELD_FRACTION = 0.2  # of the training examples, scored to choose the learning rate


def _cut(n: int, where: str) -> int:
    cut = n - max(1, round(n * HELD_FRACTION))
    if cut < 1:
        raise BertJaxError(f"{where}: {n} training examples; choosing a learning rate on a slice "
                           "needs at least 2")  # fmt: skip
    return cut


def write_train_slice(kind: str, task_dir: str, out_dir: str) -> dict[str, int]:
    """`out_dir` in `kind`'s layout: the first 80% of `task_dir`'s training examples as its
    train split and the rest as its dev split(s). Returns the two sizes."""
    from bert_jax.tasks import glue

    src, out = epath.Path(task_dir), epath.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    family = FAMILY[kind]
    if family == "glue":
        path = src / "train.tsv"
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        header = lines[:1] if glue.get_spec(kind).train_dev.header else []
        rows = lines[len(header) :]
        cut = _cut(len(rows), str(path))
        write_text_atomic(out / "train.tsv", "\n".join(header + rows[:cut]) + "\n")
        for split in glue.get_spec(kind).dev_splits:
            write_text_atomic(out / f"{split}.tsv", "\n".join(header + rows[cut:]) + "\n")
        return {"train": cut, "held": len(rows) - cut}
    config = finetune_config(family)
    if family == "ner":
        path = src / config.train_file
        blocks = [b.strip() for b in path.read_text(encoding="utf-8").split("\n\n")]
        blocks = [b for b in blocks if b and not b.startswith("-DOCSTART-")]
        cut = _cut(len(blocks), str(path))
        for name, part in ((config.train_file, blocks[:cut]), (config.dev_file, blocks[cut:])):
            write_text_atomic(out / name, "\n\n".join(part) + "\n")
        return {"train": cut, "held": len(blocks) - cut}
    path = src / config.train_file
    data = json.loads(path.read_text(encoding="utf-8"))
    paragraphs = [(a.get("title", ""), p) for a in data["data"] for p in a["paragraphs"]]
    cut = _cut(len(paragraphs), str(path))
    for name, part in ((config.train_file, paragraphs[:cut]),
                       (config.predict_file, paragraphs[cut:])):  # fmt: skip
        articles = [{"title": title, "paragraphs": [p]} for title, p in part]
        doc = {"version": data.get("version", "1.1"), "data": articles}
        write_text_atomic(out / name, json.dumps(doc, ensure_ascii=False))
    return {"train": cut, "held": len(paragraphs) - cut}
