"""The parameters of a bert-jax workdir's checkpoint whatever model it holds (XLNet, an
encoder-decoder), as unboxed float32 numpy arrays; BERT-family workdirs use
`bert_jax.checkpoint.restore_params`, which also reads their BertConfig."""

from __future__ import annotations

import jax
import numpy as np
from etils import epath

from bert_jax.checkpoint import Checkpointer, _Corrupt, _restore_params_step
from bert_jax.errors import BertJaxError


def restore_workdir_params(path: epath.Path, step: int | None = None) -> dict:
    """The newest (or `step`'s) checkpoint of `path`, without the outer {"params": ...}."""
    ckpt = Checkpointer(path / "checkpoints", read_only=True, async_save=False)
    try:
        steps = [step] if step is not None else sorted(ckpt.all_steps(), reverse=True)
        if not steps:
            raise BertJaxError(f"{path / 'checkpoints'}: no checkpoint found")
        try:
            params = _restore_params_step(ckpt, steps[0])
        except _Corrupt as e:
            raise BertJaxError(str(e)) from None
    finally:
        ckpt.close()
    params = params.get("params", params)
    return jax.tree.map(lambda x: np.asarray(x, np.float32), params)
