"""What changes with the step: the learning rate and, during batch-size warmup, the batch.

Learning rate (`schedule`):
- `reference`: linear warmup blended with a linear decay counted from step 0 (google-research/
  bert's formula, including its small drop at the end of warmup).
- `linear`: linear warmup to the peak, then linear decay to 0 over the remaining steps.
- `constant`: the peak throughout.
- `wsd`: warmup-stable-decay (trapezoidal; ModernBERT, Warner et al. 2024): linear warmup from 0
  over `warmup_steps`, the peak until the last `decay_fraction` of `train_steps`, then down to 0
  at `train_steps`, in the shape `decay_shape`: "linear" (1 - p) or "1-sqrt" (1 - sqrt(p)), p the
  fraction of the decay phase done.

Batch-size warmup (`batch_warmup_start`, `batch_warmup_steps`): the batch that counts grows
linearly from `batch_warmup_start` rows to the full global batch over `batch_warmup_steps`
steps, in whole multiples of `granularity` (data shards x microbatches, so every b(t) is a batch
the mesh could run). jit needs one batch shape, so the loop always feeds the full global batch
and the rows past b(t) get weight 0 (see `weigh_rows`): their data is read and skipped and their
compute is spent anyway, so warmup saves no time per step, only what the small early batches are
for (noisier, cheaper-in-tokens early updates). b(t) is a pure function of the step, so a resumed
run counts the same rows as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bert_jax.errors import BertJaxError

SCHEDULES = ("reference", "linear", "constant", "wsd")
DECAY_SHAPES = ("linear", "1-sqrt")


def schedule_numbers(
    peak: float,
    train_steps: int,
    warmup_steps: int,
    kind: str = "reference",
    decay_fraction: float = 0.1,
    decay_shape: str = "1-sqrt",
) -> dict[str, Any]:
    """The numbers a schedule of `kind` is computed from, checked. The train step takes them as
    inputs (bert_jax.train.trainer), not as constants of its program, so runs that differ only in
    rate or length (a rate choice, a task's epochs) run one compiled step. A length L is also
    given as its float32 reciprocal `1/L`, and a warmup's slope as peak x 1/L: XLA turns a division
    by a constant into a product with its reciprocal and folds constants together, so the step
    computes what it did with the numbers as constants, bit for bit (checked on CPU, every step
    of 258 schedules)."""
    if kind not in SCHEDULES:
        raise BertJaxError(f"schedule {kind!r}: use one of {SCHEDULES}")
    if kind == "constant":
        return {"peak": peak}
    if kind == "linear":  # optax's linear warmup joined to its linear decay
        warm, decay = max(warmup_steps, 1), max(train_steps - warmup_steps, 1)
        return {
            "peak": peak,
            "warmup_steps": warmup_steps,
            "warmup_length": warm,
            "1/warmup_length": _reciprocal(warm),
            "decay_length": decay,
            "1/decay_length": _reciprocal(decay),
        }
    if kind == "wsd":
        if decay_shape not in DECAY_SHAPES:
            raise BertJaxError(f"config.decay_shape={decay_shape!r}: use one of {DECAY_SHAPES}")
        decay_steps = wsd_decay_steps(train_steps, warmup_steps, decay_fraction)
        return {
            "peak": peak,
            "warmup_steps": warmup_steps,
            "peak/warmup_length": _ratio(peak, max(warmup_steps, 1)),
            "decay_start": train_steps - decay_steps,
            "1/decay_steps": _reciprocal(decay_steps),
        }
    return {
        "peak": peak,
        "train_steps": train_steps,
        "1/train_steps": _reciprocal(train_steps),
        "warmup_steps": warmup_steps,
        "peak/warmup_steps": _ratio(peak, warmup_steps) if warmup_steps else np.float32(0),
    }


def _reciprocal(length: int) -> np.float32:
    return np.float32(1) / np.float32(length)


def _ratio(peak: float, length: int) -> np.float32:
    """peak x step / L as XLA computes it with constants: step x (peak x 1/L), in float32."""
    return np.float32(peak) * _reciprocal(length)


def schedule_of_numbers(
    kind: str, numbers: Mapping[str, Any], warmup: bool = True, decay_shape: str = "1-sqrt"
) -> optax.Schedule:
    """`kind`'s schedule from `schedule_numbers`' numbers, Python or traced (jax scalars: the
    same values, the same float32 arithmetic). `warmup=False` (no warmup steps) leaves the
    reference schedule's warmup out of its program."""
    n = numbers
    if kind == "constant":
        return lambda step: n["peak"]
    if kind == "linear":  # optax.linear_schedule's arithmetic, joined as optax.join_schedules

        def line(start, end, length, inverse):
            return lambda step: (start - end) * (1 - jnp.clip(step, 0, length) * inverse) + end

        warm = line(0.0, n["peak"], n["warmup_length"], n["1/warmup_length"])
        decay = line(n["peak"], 0.0, n["decay_length"], n["1/decay_length"])
        boundary = n["warmup_steps"]
        return lambda step: jnp.where(step < boundary, warm(step), decay(step - boundary))
    if kind == "wsd":

        def wsd(step: jax.Array) -> jax.Array:
            step = jnp.asarray(step, jnp.float32)
            warm = step * n["peak/warmup_length"]
            done = jnp.clip((step - n["decay_start"]) * n["1/decay_steps"], 0.0, 1.0)
            shape = done if decay_shape == "linear" else jnp.sqrt(done)
            return jnp.where(step < n["warmup_steps"], warm, n["peak"] * (1.0 - shape))

        return wsd

    def reference(step: jax.Array) -> jax.Array:
        step = jnp.asarray(step, jnp.float32)
        decayed = n["peak"] * (1.0 - jnp.minimum(step, n["train_steps"]) * n["1/train_steps"])
        if not warmup:
            return decayed
        warm = step * n["peak/warmup_steps"]
        return jnp.where(step < n["warmup_steps"], warm, decayed)

    return reference


def learning_rate_schedule(
    peak: float,
    train_steps: int,
    warmup_steps: int,
    kind: str = "reference",
    decay_fraction: float = 0.1,
    decay_shape: str = "1-sqrt",
) -> optax.Schedule:
    """The schedule of `kind` with its numbers as constants (`schedule_numbers` checks them)."""
    numbers = schedule_numbers(peak, train_steps, warmup_steps, kind, decay_fraction, decay_shape)
    return schedule_of_numbers(kind, numbers, warmup_steps > 0, decay_shape)


def wsd_decay_steps(train_steps: int, warmup_steps: int, decay_fraction: float) -> int:
    """The decay phase's length: round(decay_fraction x train_steps), after the warmup."""
    if not 0.0 < decay_fraction <= 1.0:
        raise BertJaxError(f"config.decay_fraction={decay_fraction}: must be in (0, 1]")
    decay_steps = max(round(decay_fraction * train_steps), 1)
    if warmup_steps + decay_steps > train_steps:
        raise BertJaxError(
            f"config.decay_fraction={decay_fraction}: {decay_steps} decay steps after "
            f"warmup_steps={warmup_steps} exceed train_steps={train_steps}"
        )
    return decay_steps


# ---- batch-size warmup ---------------------------------------------------------------------


def check_batch_warmup(start: int, steps: int) -> None:
    """The keys' own values (their fit to the batch and mesh is `batch_size_schedule`'s)."""
    if start < 0:
        raise BertJaxError(f"config.batch_warmup_start={start}: must be >= 0 (0 = no warmup)")
    if steps < 0:
        raise BertJaxError(f"config.batch_warmup_steps={steps}: must be >= 0 (0 = no warmup)")
    if bool(start) != bool(steps):
        key, value = ("batch_warmup_steps", steps) if start else ("batch_warmup_start", start)
        raise BertJaxError(
            f"config.{key}={value}: batch-size warmup needs both batch_warmup_start and "
            "batch_warmup_steps > 0 (or both 0)"
        )


def batch_size_schedule(
    full: int, start: int, steps: int, granularity: int = 1
) -> Callable[[jax.Array], jax.Array]:
    """step -> the rows that count (int32): start + granularity x floor(k t / steps) for t < steps,
    k = (full - start) / granularity, then `full`."""
    check_batch_warmup(start, steps)
    if start > full:
        raise BertJaxError(
            f"config.batch_warmup_start={start}: larger than the global batch of {full} rows"
        )
    if start % granularity:
        raise BertJaxError(
            f"config.batch_warmup_start={start}: not a multiple of {granularity} (data shards x "
            "grad_accum_steps), so its rows would not split evenly over the mesh"
        )
    increments = (full - start) // granularity
    if increments * steps >= 2**31:  # the int32 product below
        raise BertJaxError(
            f"config.batch_warmup_steps={steps}: too many for a ramp of {increments} increments "
            "(their product must stay below 2**31)"
        )

    def rows(step: jax.Array) -> jax.Array:
        t = jnp.minimum(jnp.asarray(step, jnp.int32), steps)
        return jnp.where(t < steps, start + granularity * (increments * t // steps), full)

    return rows


def batch_warmup_rows(
    start: int, steps: int, batch_shapes: Mapping[str, jax.ShapeDtypeStruct], granularity: int
) -> Callable[[jax.Array], jax.Array] | None:
    """The trainer's b(t) for a task's global batch, or None without warmup (start = steps = 0)."""
    if not steps:
        return None
    if "example_mask" not in batch_shapes:
        raise BertJaxError(
            "config.batch_warmup_start: this task's batches have no example_mask (per-row "
            "weight), so rows cannot be left out; batch-size warmup is for pretraining tasks"
        )
    full = next(iter(batch_shapes.values())).shape[0]
    return batch_size_schedule(full, start, steps, granularity)


def weigh_rows(batch: Mapping[str, jax.Array], rows: jax.Array) -> dict[str, jax.Array]:
    """`batch` with the rows from `rows` on counting for nothing, the way eval padding does:
    `example_mask` and every per-position `*_weights` array (masked_lm_weights, label_weights)
    are 0 there, and every loss of a task whose batches have an `example_mask` is weighted by
    them."""
    keep_B = (jnp.arange(batch["example_mask"].shape[0]) < rows).astype(jnp.float32)
    out = dict(batch)
    for key, value in batch.items():
        if key == "example_mask" or key.endswith("_weights"):
            keep = keep_B.reshape((-1,) + (1,) * (value.ndim - 1))
            out[key] = value * keep.astype(value.dtype)
    return out
