"""The one module that talks to Orbax, with its input item's handler (checkpoint_input.py); its
API is moving to v1, and only these two files change then.

A workdir's `checkpoints/<step>/` holds two items: `state` (the TrainState: params, optimizer
state, step, rng, skip counters; sharded arrays, OCDBT) and `input` (each process's
input-iterator state as JSON, `process_<i>-of-<n>.json`, for exact resume). Saves are
asynchronous; the last `keep` are kept, and every multiple of `keep_every` (if set) forever.

    ckpt = Checkpointer(workdir / "checkpoints", save_every=1000, keep=3)
    ckpt.maybe_save(step, state, input_state)     # every `save_every` steps (async)
    ckpt.save(step, state, input_state)           # forced: end of run, SIGTERM
    state, input_state = ckpt.restore(trainer.abstract_state())   # latest, onto any mesh
    ckpt.close()

    config, params = restore_params(workdir)      # BertConfig + unboxed looped-layout params
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from bert_jax.atomic_write import read_json_object
from bert_jax.checkpoint_input import InputRestore, InputSave, InputStateHandler
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.model.scan import unstack_layers
from bert_jax.state_fingerprint import state_fingerprint

STATE, INPUT = "state", "input"


def _check_fingerprint(saved: dict | None, state: Any, where: str) -> None:
    if not saved:
        return  # saved by an older bert-jax: nothing to compare with
    now = state_fingerprint(state)
    bad = sorted(k for k in saved.keys() & now.keys() if saved[k] != now[k])
    if bad:
        raise _Corrupt(f"{where}: {', '.join(bad)} differ from the checksum taken at save time")


class _Corrupt(Exception):
    """A checkpoint step whose files restore to other values than were saved, or do not restore."""


_OS_ERRORS = (
    "No space left on device", "Disk quota exceeded", "Permission denied",
    "Read-only file system", "File too large",
)  # fmt: skip


class _LoggedSaveErrors(logging.Filter):
    """Keeps the errors Orbax logs from its threads. A failed asynchronous commit raises only
    once (`check_for_errors` clears it), and Orbax's finalize thread checks too: when it gets
    there first it logs the error and gives up the step, and our check finds nothing. Installed
    first on absl's logger, ahead of bert_jax.save_noise's filter that hides these records."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[BaseException] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and "/orbax/" in record.pathname and record.exc_info:
            self.errors.append(record.exc_info[1])
        return True


class Checkpointer:
    def __init__(
        self,
        directory: str | os.PathLike,
        save_every: int = 1000,
        keep: int = 3,
        async_save: bool = True,
        read_only: bool = False,
        keep_every: int = 0,
    ) -> None:
        # Orbax refuses relative paths ("Checkpoint path should be absolute"): `--workdir=run`.
        local = "://" not in os.fspath(directory)
        self.directory = epath.Path(os.path.abspath(directory) if local else directory)
        self.save_every = max(int(save_every), 1)
        options = ocp.CheckpointManagerOptions(
            max_to_keep=None if read_only else keep,
            keep_period=keep_every or None,  # e.g. Figure 5's checkpoints along pretraining
            enable_async_checkpointing=async_save,
            create=not read_only,
            read_only=read_only,
            # Saves are decided here (maybe_save / forced save), not by Orbax's interval.
            save_interval_steps=0 if read_only else 1,
        )
        if not read_only:
            self._remove_unfinished_saves()
        self._logged = _LoggedSaveErrors()
        logging.getLogger("absl").filters.insert(0, self._logged)
        self._saving: int | None = None
        self._confirmed: int | None = None
        self._reported: int | None = None  # a failed save is reported once
        handlers = {STATE: ocp.PyTreeCheckpointHandler(), INPUT: InputStateHandler()}
        self._mgr = ocp.CheckpointManager(self.directory, item_handlers=handlers, options=options)

    def _remove_unfinished_saves(self) -> None:
        """`<step>.orbax-checkpoint-tmp*` of a save that was killed or failed (disk full) would
        stay forever. Done here, synchronously: Orbax's own option runs in a thread that errors
        when the process exits first."""
        if jax.process_index() != 0 or not self.directory.exists():
            return
        for tmp in self.directory.glob("*.orbax-checkpoint-tmp*"):
            if tmp.is_dir():
                tmp.rmtree(missing_ok=True)

    def latest_step(self) -> int | None:
        return self._mgr.latest_step()

    def all_steps(self) -> list[int]:
        return list(self._mgr.all_steps())

    def save(self, step: int, state: Any, input_state: Any = None) -> bool:
        """Save now (unless `step` is already saved). Asynchronous: returns once the arrays are
        copied off the devices; `wait()` blocks until the files are complete."""
        if step in self._mgr.all_steps():
            return False
        # The previous save first (Orbax's save waits for it anyway): its failure is named as
        # its own, and a failure below is this step's, not the one before it.
        self.wait()
        items = {STATE: ocp.args.PyTreeSave(state)}
        # Checked at restore: a flipped byte in a data file otherwise restores without error.
        items[INPUT] = InputSave(input_state, state_fingerprint(state))
        self._saving = step
        self._logged.errors.clear()
        with self._save_errors():
            return self._mgr.save(step, args=ocp.args.Composite(**items), force=True)

    @contextlib.contextmanager
    def _save_errors(self):
        """An asynchronous save that failed (disk full, permissions, a lost bucket) raises at the
        next call into Orbax: one line naming the step, and the steps that are intact."""
        try:
            yield
        except BertJaxError:
            raise
        except Exception as e:
            first = (str(e).strip().splitlines() or [""])[0][:300]
            known = [m for m in _OS_ERRORS if m in str(e)]  # the cause, not Orbax's path to it
            first = known[0] if known else first
            step = getattr(self, "_saving", None)
            self._reported = step
            intact = self._intact_steps(other_than=step)
            raise BertJaxError(
                f"{self.directory}: saving checkpoint step {step} failed ({type(e).__name__}: "
                f"{first}); intact checkpoints: {intact or 'none'}"
            ) from e

    def check(self) -> None:
        """Raise (one line) if an asynchronous save has failed; cheap, called after every step.

        It only looks at Orbax's finalize thread (private in Orbax 0.12) and never calls
        `check_for_errors` while a save is in flight: that raises a commit error once and clears
        it, so taking it here let the finalize thread go on to finalize the broken step."""
        finalize = getattr(self._mgr, "_finalize_thread", None)
        thread = finalize.map(lambda t: t) if finalize is not None else None
        step = self._saving
        busy = thread is not None and thread.is_alive()
        if busy or step in (None, self._confirmed, self._reported):
            return
        with self._save_errors():
            if thread is not None and thread.exception is not None:
                self._mgr.wait_until_finished()  # raises the thread's error, drops the step
                raise thread.exception
            if jax.process_index() != 0:
                return  # (process 0 renames the finished step: only it can tell)
            if not self._finalized(step):
                # The error was taken and only logged in Orbax's threads (see _LoggedSaveErrors).
                raise self._logged_error("the save did not complete")
            self._confirmed = step  # one look per save, not per step (gs:// listings)

    def _intact_steps(self, other_than: int | None) -> list[int]:
        """The finished steps on disk, the failed one aside: what a rerun can restore. Read
        from the directory, not Orbax's list, which may still hold a step it gave up on."""
        try:
            steps = [int(p.name) for p in self.directory.iterdir() if p.name.isdigit()]
        except OSError:
            steps = list(self._mgr.all_steps())
        return sorted(s for s in steps if s != other_than and self._finalized(s))

    def _logged_error(self, fallback: str) -> BaseException:
        return (self._logged.errors or [RuntimeError(fallback)])[-1]

    def _finalized(self, step: int) -> bool:
        path = self.directory / str(step)
        return path.exists() and ocp.step.is_checkpoint_finalized(path)

    def reached_preemption(self, step: int) -> bool:
        """True at the step where every JAX process saves after a preemption notice (SIGTERM to
        any of them); JAX's sync point, to be called after every step by every process."""
        return self._mgr.reached_preemption(step)

    def maybe_save(self, step: int, state: Any, input_state: Any = None) -> bool:
        self.check()
        if step % self.save_every:
            return False
        return self.save(step, state, input_state)

    def restore(self, abstract_state: Any, step: int | None = None) -> tuple[Any, Any]:
        """Restore `step` (default: the newest intact step) onto the shardings of
        `abstract_state` (any mesh). Without `step`, a step that fails to restore or whose values
        differ from the checksum taken when it was saved is moved aside to `<step>.corrupt` and
        the next older step is tried; `self.notes` says what was skipped."""
        self.notes: list[str] = []
        if step is not None:
            try:
                return self._restore_step(abstract_state, step)
            except _Corrupt as e:
                raise BertJaxError(str(e)) from e
        steps = sorted(self.all_steps(), reverse=True)
        if not steps:
            raise BertJaxError(f"{self.directory}: no checkpoint to restore")
        for s in steps:
            try:
                out = self._restore_step(abstract_state, s)
            except _Corrupt as e:
                self.notes.append(f"{e}; moved aside to {self._set_aside(s)}")
                continue
            if self.notes:
                self.notes.append(f"restored step {s}, the newest intact checkpoint")
            return out
        raise BertJaxError(
            f"{self.directory}: no intact checkpoint ({'; '.join(self.notes)})"
        )

    def _set_aside(self, step: int) -> epath.Path:
        """A corrupt step leaves the step list (so training can save that step again)."""
        src, dst = self.directory / str(step), self.directory / f"{step}.corrupt"
        if jax.process_index() == 0 and src.exists():
            if dst.exists():
                dst.rmtree()
            src.rename(dst)
        self._mgr.reload()
        return dst

    def _restore_step(self, abstract_state: Any, step: int) -> tuple[Any, Any]:
        where = f"{self.directory / str(step)}"
        try:
            out = self._restore_items(abstract_state, step)
        except BertJaxError:
            raise
        except Exception as e:  # Orbax/tensorstore raise many types for a damaged step
            raise _does_not_restore(where, e) from e
        record = out[INPUT] or {}
        _check_fingerprint(record.get("fingerprint"), out[STATE], where)
        return out[STATE], record.get("input")

    def _restore_items(self, abstract_state: Any, step: int) -> Any:
        return self._mgr.restore(
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

    def wait(self) -> None:
        if self._saving is not None and self._saving == self._reported:
            return  # its failure was raised already
        with self._save_errors():
            self._mgr.wait_until_finished()
        self.check()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            with contextlib.suppress(Exception):  # its threads stop even after a failed save
                self._mgr.close()
            logging.getLogger("absl").removeFilter(self._logged)


def read_workdir_config(workdir: str | os.PathLike) -> dict:
    path = epath.Path(workdir) / "config.json"
    return read_json_object(path, f"{path}: no config.json; is {workdir} a bert-jax workdir?")


def restore_params(workdir: str | os.PathLike, step: int | None = None) -> tuple[BertConfig, dict]:
    """(BertConfig, params) of a workdir's latest (or given) checkpoint, as host numpy arrays,
    unboxed, in the looped layer layout (`encoder/layer_{i}`), whatever mesh it was saved on."""
    cfg = read_workdir_config(workdir)
    if "bert" not in cfg:
        raise BertJaxError(f"{epath.Path(workdir) / 'config.json'}: has no 'bert' model config")
    bert_config = BertConfig.from_dict(cfg["bert"], source=str(epath.Path(workdir) / "config.json"))
    ckpt = Checkpointer(epath.Path(workdir) / "checkpoints", read_only=True, async_save=False)
    try:
        steps = sorted(ckpt.all_steps(), reverse=True)
        if step is not None and step not in steps:
            have = ", ".join(map(str, sorted(steps))) or "none"
            raise BertJaxError(f"{ckpt.directory}: no checkpoint at step {step} (steps: {have})")
        steps = steps if step is None else [step]
        if not steps:
            raise BertJaxError(f"{epath.Path(workdir) / 'checkpoints'}: no checkpoint found")
        skipped = []
        for s in steps:  # the newest intact step (read-only: a corrupt one is only reported)
            try:
                params = _restore_params_step(ckpt, s)
            except _Corrupt as e:
                if step is not None:
                    raise BertJaxError(str(e)) from e
                skipped.append(str(e))
                continue
            for note in skipped:
                print(f"bert-jax: warning: {note}; using step {s}", file=sys.stderr, flush=True)
            return bert_config, unstack_layers(params)
        raise BertJaxError(f"{ckpt.directory}: no intact checkpoint ({'; '.join(skipped)})")
    finally:
        ckpt.close()


def _restore_params_step(ckpt: Checkpointer, step: int) -> dict:
    where = f"{ckpt.directory / str(step)}"
    mgr = ckpt._mgr
    try:
        meta = mgr.item_metadata(step)[STATE]
    except Exception as e:  # a damaged step: Orbax raises many types
        raise _does_not_restore(where, e) from e
    tree = meta.tree if hasattr(meta, "tree") else meta
    if tree is None or "params" not in tree:
        raise BertJaxError(f"{where}: no params in the checkpoint")
    params_meta = tree["params"]
    restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), params_meta)
    try:
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
    except Exception as e:
        raise _does_not_restore(where, e) from e
    params = out[STATE]["params"]
    saved = _saved_fingerprint(ckpt.directory / str(step) / INPUT)
    if saved and "params" in saved:
        _check_fingerprint({"params": saved["params"]}, {"params": params}, where)
    return params


def _does_not_restore(where: str, e: Exception) -> _Corrupt:
    """The one-line error for a damaged step (Orbax and TensorStore raise many types)."""
    first = (str(e).strip().splitlines() or [""])[0][:300]
    return _Corrupt(f"{where}: does not restore ({type(e).__name__}: {first})")


def _saved_fingerprint(input_dir: epath.Path) -> dict | None:
    files = sorted(input_dir.glob("process_0-of-*.json")) if input_dir.exists() else []
    if not files:
        return None
    try:
        return json.loads(files[0].read_text()).get("fingerprint")
    except (json.JSONDecodeError, AttributeError):
        return None
