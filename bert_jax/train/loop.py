"""The task-agnostic training loop: init or resume, step, log, evaluate, checkpoint, stop.

    result = train(config, task, workdir, workdir_config={"bert": bert_config.to_dict()})

`task` is a `bert_jax.train.task.Task` that also provides
    task.train_input(trainer) -> resumable iterator of batches (get_state()/set_state())
    task.evaluate(trainer, params) -> dict of eval metrics          (optional)
Config keys read here: train_steps, log_every_steps, eval_every_steps, checkpoint_every_steps,
keep_checkpoints, keep_checkpoint_every_steps, async_checkpoints, max_nonfinite_steps,
mesh.{data,fsdp,tensor} (plus the trainer's keys, see bert_jax.train.trainer). Pass `batches=` to
use another iterator (tests), `init_params=` to start from pretrained weights (ignored when the
workdir has a checkpoint: a rerun of the same command resumes exactly, and a rerun with another
config is refused, see bert_jax.train.workdir) and `preflight=` for a check of the built trainer
before any data is read (the runs pass the TPU memory check of bert_jax.aot).

Preemption (SIGTERM): one process saves at the next step and stops. Several processes use JAX's
preemption sync point instead: the notice reaches every process and all of them save the same
step (a host saving alone would wait forever in the collective save).
"""

from __future__ import annotations

import dataclasses
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath

from bert_jax.checkpoint import Checkpointer
from bert_jax.errors import BertJaxError, StoppedAndSaved
from bert_jax.train import mesh as mesh_lib
from bert_jax.train.lock import WorkdirLock
from bert_jax.train.peak import PeakTracker
from bert_jax.train.settings import TrainSettings, train_settings
from bert_jax.train.trainer import Trainer, TrainState, build_trainer
from bert_jax.train.workdir import check_resume, config_record, write_config
from bert_jax.train.writers import Console, MetricsWriter, now


@dataclasses.dataclass
class TrainResult:
    state: TrainState
    trainer: Trainer
    last_metrics: dict[str, float]
    last_eval: dict[str, float]
    preempted: bool = False

    def require_finished(self, workdir: Any, total_steps: int) -> None:
        """For callers that use the model next (scoring it, phase 2, a launch script's next
        line): after a SIGTERM the saved step is not the end, and what followed would pass
        for a finished run's."""
        if self.preempted:
            raise StoppedAndSaved(
                f"{workdir}: training stopped by SIGTERM at step {int(self.state.step)} of "
                f"{total_steps} and saved it; unfinished, it was neither scored nor exported. "
                "Rerun the same command to finish"
            )


def maybe_initialize_distributed(config: Any) -> None:  # a config or its TrainSettings
    """`config.distributed`: False (single process), True/'auto' (TPU pods: addresses from the
    environment), or a dict with coordinator_address, num_processes, process_id."""
    dist = train_settings(config).distributed
    if not dist:
        return
    if jax.distributed.is_initialized():
        return
    if isinstance(dist, bool) or dist == "auto":
        jax.distributed.initialize()
    else:
        jax.distributed.initialize(**dict(dist))


class _Preemption:
    """SIGTERM (TPU maintenance / preemption) -> save at a step and stop. One process: its own
    handler, save at the next step. Several: JAX's preemption service owns SIGTERM (its notifier
    is installed by jax.distributed.initialize, so no Python handler may replace it) and names
    the step at which every process saves (`Checkpointer.reached_preemption`)."""

    def __init__(self, ckpt: Checkpointer) -> None:
        self._ckpt = ckpt
        self._signalled = False
        self._old = None

    def __enter__(self):
        if jax.process_count() > 1:
            return self
        try:
            self._old = signal.signal(signal.SIGTERM, self._handle)
        except ValueError:  # not the main thread
            self._old = None
        return self

    def _handle(self, signum, frame) -> None:
        self._signalled = True

    def reached(self, step: int) -> bool:
        """Called by every process after every step, as JAX's sync point requires."""
        if jax.process_count() > 1:
            return self._ckpt.reached_preemption(step)
        return self._signalled

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)


def _tokens_per_step(trainer: Trainer) -> int:
    shapes = trainer.task.init_inputs()
    per_task = getattr(trainer.task, "tokens_per_step", None)
    if per_task is not None:  # e.g. seq2seq: input plus target tokens
        return int(per_task(next(iter(shapes.values())).shape[0]))
    for key in ("input_ids", "input_mask"):  # a tagger over precomputed features has no ids
        if key in shapes:
            return int(np.prod(shapes[key].shape))
    return next(iter(shapes.values())).shape[0]


def _mean_metrics(window: list[dict[str, jax.Array]]) -> dict[str, float]:
    stacked = jax.device_get({k: jnp.stack([m[k] for m in window]) for k in window[0]})
    out = {k: float(np.mean(v)) for k, v in stacked.items()}
    out["learning_rate"] = float(stacked["learning_rate"][-1])
    if "batch_size" in stacked:  # batch-size warmup: the rows that counted at the logged step
        out["batch_size"] = int(stacked["batch_size"][-1])
    out["nonfinite_consecutive"] = int(stacked["nonfinite_consecutive"][-1])
    out["update_skipped"] = int(np.sum(stacked["update_skipped"]))
    return out


def _check_skips(consecutive: int, max_skips: int, step: int, ckpt: Checkpointer) -> None:
    if max_skips and consecutive >= max_skips:
        # Weights saved after the streak began are those of its start (updates were skipped), but
        # the steps just before it may already have diverged: name a checkpoint from before.
        ckpt.wait()
        good = [s for s in ckpt.all_steps() if s < step - consecutive]
        last = f"step {max(good)}" if good else "none (no checkpoint before the streak)"
        raise BertJaxError(
            f"{consecutive} consecutive steps with non-finite loss, gradients or update "
            f"(max_nonfinite_steps={max_skips}) at step {step}; their updates were skipped; the "
            f"last checkpoint from before the streak: {last} in {ckpt.directory}"
        )


def train(
    config: Any,
    task: Any,
    workdir: str,
    *,
    workdir_config: dict | None = None,
    init_params: Any = None,
    batches: Iterator | None = None,
    mesh: jax.sharding.Mesh | None = None,
    preflight: Callable[[Trainer, Any], Any] | None = None,
    settings: TrainSettings | None = None,
) -> TrainResult:
    """Train `task` into `workdir` (resuming from its checkpoints); `settings` is `config`'s
    TrainSettings when the caller has already read them (else they are read here)."""
    settings = settings or train_settings(config)  # checked before the workdir is touched
    workdir = epath.Path(workdir)
    with WorkdirLock(workdir):  # a second run on this workdir is refused, not interleaved
        return _train_locked(
            config, settings, task, workdir, workdir_config, init_params, batches, mesh,
            preflight,
        )  # fmt: skip


def _train_locked(
    config: Any,
    settings: TrainSettings,
    task: Any,
    workdir: epath.Path,
    workdir_config: dict | None,
    init_params: Any,
    batches: Iterator | None,
    mesh: jax.sharding.Mesh | None,
    preflight: Callable[[Trainer, Any], Any] | None,
) -> TrainResult:
    ckpt = Checkpointer(
        workdir / "checkpoints",
        save_every=settings.checkpoint_every_steps,
        keep=settings.keep_checkpoints,
        keep_every=settings.keep_checkpoint_every_steps,
        async_save=settings.async_checkpoints,
    )
    writer = None
    failed = True
    try:
        record = config_record(config, workdir_config)
        resume_step = ckpt.latest_step()
        if resume_step is not None:  # before config.json is rewritten: it must describe the ckpt
            check_resume(workdir, record)
        write_config(workdir, record)
        mesh = mesh or mesh_lib.make_mesh(settings.mesh)
        trainer = build_trainer(settings, task, mesh)
        if preflight is not None:  # e.g. the TPU fit check: an out-of-memory step fails before data
            preflight(trainer, config)
        console = Console(settings.train_steps)
        it = batches if batches is not None else task.train_input(trainer)
        if resume_step is not None:
            state, input_state = ckpt.restore(trainer.abstract_state())
            for note in ckpt.notes:  # corrupt steps skipped, said on stderr even when quiet
                print(f"bert-jax: warning: {note}", file=sys.stderr, flush=True)
            resume_step = int(jax.device_get(state.step))
            if input_state is not None and hasattr(it, "set_state"):
                it.set_state(input_state)
            console.message(f"resumed from {workdir / 'checkpoints'} at step {resume_step}")
        else:
            state = trainer.init_state(init_params)
        writer = MetricsWriter(workdir, resume_step=resume_step)
        result = _run(settings, task, trainer, state, it, ckpt, writer, console)
        failed = False
        return result
    finally:
        _close(ckpt, writer, failed)


def _close(ckpt: Checkpointer, writer: MetricsWriter | None, failed: bool) -> None:
    """Close both whatever either raises (a writer left open flushes again at exit, on a full
    disk as a traceback); when the run already failed, its own error is the one reported."""
    errors = []
    for close in (ckpt.close, writer.close if writer is not None else None):
        try:
            if close is not None:
                close()
        except Exception as e:
            errors.append(e)
    if errors and not failed:
        raise errors[0]


def _run(
    settings: TrainSettings,
    task: Any,
    trainer: Trainer,
    state: TrainState,
    it: Iterator,
    ckpt: Checkpointer,
    writer: MetricsWriter,
    console: Console,
) -> TrainResult:
    """Steps from `state` to train_steps: log, evaluate, checkpoint, stop on SIGTERM."""
    mesh = trainer.mesh
    total = settings.train_steps
    get_input_state = getattr(it, "get_state", lambda: None)
    keys = list(trainer.batch_shardings)
    tokens = _tokens_per_step(trainer)
    seqs = next(iter(trainer.task.init_inputs().values())).shape[0]
    peak = PeakTracker(list(mesh.devices.flat))
    step_flops = trainer.flops_per_step
    log_every = max(settings.log_every_steps, 1)
    eval_every = settings.eval_every_steps
    max_skips = settings.max_nonfinite_steps
    console.message(
        f"{total} steps, {seqs} sequences x {tokens // max(seqs, 1)} tokens per step, mesh "
        f"{dict(mesh.shape)}, {step_flops / 1e9:.2f} GFLOPs per step; MFU vs {peak.describe()}"
    )

    step = int(jax.device_get(state.step))
    window: list[dict] = []
    last: dict[str, float] = {}
    last_eval: dict[str, float] = {}
    t_window, steps_in_window, t_first = None, 0, None
    preempted = False
    prev = None
    with _Preemption(ckpt) as preemption:
        while step < total:
            try:
                batch = next(it)
            except StopIteration:
                raise BertJaxError(f"training input ran out at step {step}") from None
            batch = trainer.place_batch({k: batch[k] for k in keys})
            state, metrics = trainer.train_step(state, batch)
            step += 1
            if prev is not None:  # one step behind, so the host never waits for the device
                _check_skips(int(prev["nonfinite_consecutive"]), max_skips, step - 1, ckpt)
            prev = metrics
            window.append(metrics)
            if t_window is None:  # the first step includes compilation: time from its end
                jax.block_until_ready(metrics)
                t_window, t_first, steps_in_window = now(), now(), 0
                first_step = step
            else:
                steps_in_window += 1
            console.progress(step)
            if step % log_every == 0 or step == total:
                last = _mean_metrics(window)
                window = []
                elapsed = now() - t_window
                if steps_in_window:
                    per_step = elapsed / steps_in_window
                    last["tokens_per_sec"] = tokens / per_step
                    last["seq_per_sec"] = seqs / per_step
                    last["mfu"] = step_flops / per_step / peak.update(step_flops / per_step)
                    last["peak_flops"] = peak.peak
                t_window, steps_in_window = now(), 0
                rate = (now() - t_first) / max(step - first_step, 1)
                writer.write(step, last)
                console.log(step, last, rate * (total - step))
                _check_skips(last["nonfinite_consecutive"], max_skips, step, ckpt)
            if eval_every and step % eval_every == 0 and hasattr(task, "evaluate"):
                last_eval = task.evaluate(trainer, state.params) or {}
                if last_eval:
                    last_eval = {f"eval_{k}": v for k, v in last_eval.items()}
                    writer.write(step, last_eval)
                    console.eval(step, last_eval)
            if preemption.reached(step):
                ckpt.save(step, state, get_input_state())
                writer.flush()
                console.message(f"SIGTERM: saved step {step}, stopping")
                preempted = True
                break
            if ckpt.maybe_save(step, state, get_input_state()):
                writer.flush()  # the metrics of every checkpointed step are kept
    if not preempted:
        ckpt.save(step, state, get_input_state())
    return TrainResult(state, trainer, last, last_eval, preempted)
