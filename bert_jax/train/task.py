"""The `Task` protocol: everything the task-agnostic trainer needs to know about a model/objective.

Pretraining (`bert_jax.pretraining.task.PretrainingTask`) is one Task; fine-tuning tasks
(`bert_jax.tasks.*`) are others. The trainer (`bert_jax.train.trainer.build_trainer`) and the loop
(`bert_jax.train.loop.train`) only talk to a task through this interface:

    model          a Flax Linen module; `model.init(rngs, **init_inputs, deterministic=True)` and
                   `model.apply({"params": p}, **batch_inputs, deterministic=..., rngs=...)`.
    init_inputs()  dict name -> jax.ShapeDtypeStruct of a *global* batch; used for init, for the
                   batch shardings (leading axis = batch) and for AOT lowering without data.
    loss_fn(params, batch, rng, deterministic) -> (loss scalar, metrics dict of scalars)
                   `batch` holds the arrays of `init_inputs()` (plus any labels it declares there);
                   metrics are averaged over microbatches and logged under their own names.
    train_input(trainer) -> iterator of batch dicts (global jax.Arrays or numpy), resumable:
                   `get_state()` -> JSON-able dict, `set_state(state)` (see `BatchIterator`).
    loss_denominators(batch) -> dict of scalars, optional: the denominators of the loss's
                   weighted means over a whole batch. With gradient accumulation the trainer
                   passes each microbatch 1/n of them (batch key "loss_denominators") so the
                   microbatch losses add up to the full-batch loss; without it, each microbatch
                   is normalised on its own (exact only when every microbatch weighs the same).
    evaluate(trainer, params) -> dict of eval metrics (logged with an `eval_` prefix), optional.
    predict(params, batch) -> the model's outputs (e.g. logits), deterministic, optional; the
                   trainer jits it as `trainer.predict_step` (fine-tuning's dev/test evaluation).

A task may leave `train_input`/`evaluate` to the caller of the loop (fine-tuning and tests pass
`batches=`); `loss_fn`, `model` and `init_inputs` are what the jitted step is built from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

import flax.linen as nn
import jax

Batch = Mapping[str, jax.Array]
Metrics = dict[str, jax.Array]


@runtime_checkable
class BatchIterator(Protocol):
    """A resumable iterator of batches (`bert_jax.input.PretrainInput` satisfies it)."""

    def __iter__(self) -> Iterator[Batch]: ...
    def __next__(self) -> Batch: ...
    def get_state(self) -> Any: ...
    def set_state(self, state: Any) -> None: ...


class Task(Protocol):
    model: nn.Module

    def init_inputs(self) -> dict[str, jax.ShapeDtypeStruct]:
        """Global-batch shapes of every array the step receives (inputs and labels)."""
        ...

    def model_inputs(self, batch: Batch) -> dict[str, jax.Array]:
        """The subset of a batch passed to `model.init` as keyword arguments."""
        ...

    def loss_fn(
        self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Metrics]: ...

    def flops_per_step(self, global_batch_size: int) -> float:
        """Model FLOPs (fwd + bwd, no remat) of one optimizer step, for MFU."""
        ...


EvalFn = Callable[[Any], dict[str, float]]
