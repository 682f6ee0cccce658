"""Build our parameter tree from any name -> array source, with shape and completeness checks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bert_jax.arch.bert.names import Weight, set_path, weights
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError


def assemble(
    config: BertConfig,
    source: str,
    shapes: dict[str, tuple[int, ...]],
    read: Callable[[str], np.ndarray],
    key_of: Callable[[Weight], str],
    hf_layout: bool,
) -> tuple[dict, tuple[str, ...]]:
    """Returns (params, groups present). `shapes` lists the source's variables, `read` loads one,
    `key_of` names a weight in the source. The encoder must be complete; each head is all or none.
    """
    by_group: dict[str, list[Weight]] = {}
    for w in weights(config):
        by_group.setdefault(w.group, []).append(w)
    params: dict = {}
    present = []
    for group, ws in by_group.items():
        found = [w for w in ws if key_of(w) in shapes]
        if not found and group != "encoder":
            continue
        if len(found) != len(ws):
            missing = next(key_of(w) for w in ws if key_of(w) not in shapes)
            raise BertJaxError(f"{source}: has no variable {missing} (needed for the {group})")
        for w in ws:
            key = key_of(w)
            want = w.hf_shape if hf_layout else w.tf_shape
            have = tuple(shapes[key])
            if have != want:
                raise BertJaxError(f"{source}: {key} has shape {have}, config says {want}")
            x = np.asarray(read(key), dtype=np.float32)
            if hf_layout and w.hf_transposed:
                x = x.T
            set_path(params, w.path, np.ascontiguousarray(w.to_ours(x)))
        present.append(group)
    return params, tuple(present)
