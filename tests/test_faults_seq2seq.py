"""Faults of the seq2seq surfaces (issue 32): the span-corruption / prefix-LM data step, `bert-jax
generate`, the T5 config and sentencepiece vocabulary, and the checkpoint message every family's
training run prints when a save fails. Each case is refused with one line before any work, and
never replaces or truncates a finished output."""

from __future__ import annotations

import errno

import jax.numpy as jnp
import pytest

from bert_jax.checkpoint import Checkpointer, InputStateHandler
from bert_jax.errors import BertJaxError


# ---- a failed checkpoint save names itself and the steps that are intact ----------------------
@pytest.mark.parametrize("async_save", [False, True])
def test_failed_save_names_its_own_step_and_the_intact_ones(tmp_path, monkeypatch, async_save):
    """A T5 run (synchronous saves) on a full disk said "saving checkpoint step 2 failed; intact
    checkpoints: none" when step 2 was intact and the save of step 4 failed."""
    state = {"params": {"w": jnp.arange(8.0)}, "step": jnp.int32(0)}
    ckpt = Checkpointer(tmp_path / "checkpoints", async_save=async_save, keep=5)
    ckpt.save(2, state, {"position": 2})
    ckpt.wait()
    write = InputStateHandler.save

    def full_disk(self, directory, args):
        if args.state["position"] == 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, directory, args)

    monkeypatch.setattr(InputStateHandler, "save", full_disk)
    with pytest.raises(BertJaxError) as e:
        ckpt.save(4, state, {"position": 4})
        ckpt.wait()
    ckpt.close()
    message = str(e.value)
    assert "saving checkpoint step 4 failed (OSError: No space left on device)" in message, message
    assert message.endswith("intact checkpoints: [2]"), message
    monkeypatch.undo()
    again = Checkpointer(tmp_path / "checkpoints")  # the rerun resumes from the intact step
    assert again.latest_step() == 2
    again.close()
