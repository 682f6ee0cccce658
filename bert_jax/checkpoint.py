"""The one module that talks to Orbax (its API is moving to v1; only this file changes then).

A workdir's `checkpoints/<step>/` holds two items: `state` (the TrainState: params, optimizer
state, step, rng, skip counters; sharded arrays, OCDBT) and `input` (each process's
input-iterator state as JSON, `process_<i>-of-<n>.json`, for exact resume). Saves are
asynchronous; the last `keep` are kept.

    ckpt = Checkpointer(workdir / "checkpoints", save_every=1000, keep=3)
    ckpt.maybe_save(step, state, input_state)     # every `save_every` steps (async)
    ckpt.save(step, state, input_state)           # forced: end of run, SIGTERM
    state, input_state = ckpt.restore(trainer.abstract_state())   # latest, onto any mesh
    ckpt.close()

    config, params = restore_params(workdir)      # BertConfig + unboxed looped-layout params
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.model import unstack_layers

STATE, INPUT = "state", "input"


class InputStateHandler(ocp.CheckpointHandler):
    """Each JAX process writes its own input-iterator state (`process_<i>-of-<n>.json`); the state
    is snapshotted when `save` is called, so async array saves never see a later position."""

    def _file(self, directory: epath.Path) -> epath.Path:
        return directory / f"process_{jax.process_index()}-of-{jax.process_count()}.json"

    def save(self, directory: epath.Path, args: InputSave) -> None:
        self._file(directory).write_text(json.dumps({"input": args.state}))

    def restore(self, directory: epath.Path, args: InputRestore | None = None) -> Any:
        path = self._file(directory)
        if not path.exists():
            raise BertJaxError(
                f"{path}: missing; was the run saved with a different process count?"
            )
        return json.loads(path.read_text())["input"]

    def metadata(self, directory: epath.Path) -> None:
        return None

    def finalize(self, directory: epath.Path) -> None:
        pass

    def close(self) -> None:
        pass


@ocp.args.register_with_handler(InputStateHandler, for_save=True)
@dataclasses.dataclass
class InputSave(ocp.args.CheckpointArgs):
    state: Any


@ocp.args.register_with_handler(InputStateHandler, for_restore=True)
@dataclasses.dataclass
class InputRestore(ocp.args.CheckpointArgs):
    pass


class Checkpointer:
    def __init__(
        self,
        directory: str | os.PathLike,
        save_every: int = 1000,
        keep: int = 3,
        async_save: bool = True,
        read_only: bool = False,
    ) -> None:
        self.directory = epath.Path(directory)
        self.save_every = max(int(save_every), 1)
        options = ocp.CheckpointManagerOptions(
            max_to_keep=None if read_only else keep,
            enable_async_checkpointing=async_save,
            create=not read_only,
            read_only=read_only,
            # Saves are decided here (maybe_save / forced save), not by Orbax's interval.
            save_interval_steps=0 if read_only else 1,
        )
        handlers = {STATE: ocp.PyTreeCheckpointHandler(), INPUT: InputStateHandler()}
        self._mgr = ocp.CheckpointManager(self.directory, item_handlers=handlers, options=options)

    def latest_step(self) -> int | None:
        return self._mgr.latest_step()

    def all_steps(self) -> list[int]:
        return list(self._mgr.all_steps())

    def save(self, step: int, state: Any, input_state: Any = None) -> bool:
        """Save now (unless `step` is already saved). Asynchronous: returns once the arrays are
        copied off the devices; `wait()` blocks until the files are complete."""
        if step in self._mgr.all_steps():
            return False
        items = {STATE: ocp.args.PyTreeSave(state)}
        items[INPUT] = InputSave(input_state)
        return self._mgr.save(step, args=ocp.args.Composite(**items), force=True)

    def reached_preemption(self, step: int) -> bool:
        """True at the step where every JAX process saves after a preemption notice (SIGTERM to
        any of them); JAX's sync point, to be called after every step by every process."""
        return self._mgr.reached_preemption(step)

    def maybe_save(self, step: int, state: Any, input_state: Any = None) -> bool:
        if step % self.save_every:
            return False
        return self.save(step, state, input_state)

    def restore(self, abstract_state: Any, step: int | None = None) -> tuple[Any, Any]:
        """Restore `step` (default latest) onto the shardings of `abstract_state` (any mesh)."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise BertJaxError(f"{self.directory}: no checkpoint to restore")
        out = self._mgr.restore(
            step,
            args=ocp.args.Composite(
                **{
                    STATE: ocp.args.PyTreeRestore(
                        item=abstract_state,
                        restore_args=ocp.checkpoint_utils.construct_restore_args(abstract_state),
                    ),
                    INPUT: InputRestore(),
                }
            ),
        )
        return out[STATE], out[INPUT]

    def wait(self) -> None:
        self._mgr.wait_until_finished()

    def close(self) -> None:
        self._mgr.wait_until_finished()
        self._mgr.close()


def read_workdir_config(workdir: str | os.PathLike) -> dict:
    path = epath.Path(workdir) / "config.json"
    if not path.exists():
        raise BertJaxError(f"{path}: no config.json; is {workdir} a bert-jax workdir?")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BertJaxError(f"{path}: not valid JSON ({e})") from None


def restore_params(workdir: str | os.PathLike, step: int | None = None) -> tuple[BertConfig, dict]:
    """(BertConfig, params) of a workdir's latest (or given) checkpoint, as host numpy arrays,
    unboxed, in the looped layer layout (`encoder/layer_{i}`), whatever mesh it was saved on."""
    cfg = read_workdir_config(workdir)
    if "bert" not in cfg:
        raise BertJaxError(f"{epath.Path(workdir) / 'config.json'}: has no 'bert' model config")
    bert_config = BertConfig.from_dict(cfg["bert"], source=str(epath.Path(workdir) / "config.json"))
    ckpt = Checkpointer(epath.Path(workdir) / "checkpoints", read_only=True, async_save=False)
    step = ckpt.latest_step() if step is None else step
    if step is None:
        raise BertJaxError(f"{epath.Path(workdir) / 'checkpoints'}: no checkpoint found")
    mgr = ckpt._mgr
    meta = mgr.item_metadata(step)[STATE]
    tree = meta.tree if hasattr(meta, "tree") else meta
    if tree is None or "params" not in tree:
        raise BertJaxError(f"{ckpt.directory}/{step}: no params in the checkpoint")
    params_meta = tree["params"]
    restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), params_meta)
    out = mgr.restore(
        step,
        args=ocp.args.Composite(
            **{
                STATE: ocp.args.PyTreeRestore(
                    item={"params": params_meta},
                    restore_args={"params": restore_args},
                    partial_restore=True,
                )
            }
        ),
    )
    ckpt.close()
    return bert_config, unstack_layers(out[STATE]["params"])
