"""Checkpoints kept along a run (`keep_checkpoint_every_steps`) and fine-tuning from one of them
(`init_checkpoint_step`): what Figure 5 needs at every scale."""

from __future__ import annotations

import itertools

import jax
import ml_collections
import numpy as np
import pytest

from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.checkpoint import Checkpointer
from bert_jax.config import preset
from bert_jax.errors import BertJaxError
from bert_jax.pretraining.task import PretrainingTask, synthetic_batch
from bert_jax.train import train


def test_checkpoints_every_period_are_kept_and_a_step_loads(tmp_path, tiny_hf_dir):
    model = preset("L1-H64-A2", vocab_size=128, max_position_embeddings=32)
    task = PretrainingTask(model, 4, 16, 3)
    config = ml_collections.ConfigDict(dict(
        optimizer="adamw", learning_rate=1e-2, schedule="constant", train_steps=8,
        warmup_steps=0, seed=0, log_every_steps=4, checkpoint_every_steps=2,
        keep_checkpoints=1, keep_checkpoint_every_steps=4, async_checkpoints=False,
        mesh=dict(data=1, fsdp=1, tensor=1),
    ))  # fmt: skip
    batches = (synthetic_batch(task, i) for i in itertools.count())
    train(config, task, str(tmp_path), batches=batches,
          workdir_config={"bert": task.bert_config.to_dict()})  # fmt: skip
    ckpt = Checkpointer(tmp_path / "checkpoints", read_only=True, async_save=False)
    assert sorted(ckpt.all_steps()) == [4, 8]  # 2 and 6 were saved, then dropped (keep 1)
    ckpt.close()

    mid, last = load_pretrained(tmp_path, step=4), load_pretrained(tmp_path)
    assert load_pretrained(tmp_path, step=8).params.keys() == last.params.keys()
    flat = [jax.tree.leaves(p.params) for p in (mid, last)]
    assert any(not np.array_equal(a, b) for a, b in zip(*flat, strict=True))
    with pytest.raises(BertJaxError, match=r"checkpoints: no checkpoint at step 6 \(steps: 4, 8\)"):
        load_pretrained(tmp_path, step=6)
    with pytest.raises(BertJaxError, match="needs a bert-jax workdir"):
        load_pretrained(tiny_hf_dir, step=4)
