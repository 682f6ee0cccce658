"""The jitted train step over a mesh, built once from (config, task, mesh) and data-free.

    trainer = build_trainer(config, task, mesh)
    trainer.abstract_state()    # TrainState of jax.ShapeDtypeStruct with .sharding (AOT, restore)
    trainer.state_shardings     # TrainState of NamedSharding
    trainer.batch_shardings     # dict name -> NamedSharding (leading axis over ('data','fsdp'))
    trainer.batch_specs()       # dict name -> ShapeDtypeStruct with sharding (AOT lowering)
    state = trainer.init_state()            # or init_state(params=...) to start from weights
    state, metrics = trainer.train_step(state, batch)    # jax.jit, explicit shardings, donated
    trainer.train_step.lower(state_specs, batch_specs)  # AOT: the jitted step's lowering
    metrics = trainer.eval_step(state.params, batch)
    outputs = trainer.predict_step(state.params, batch)  # task.predict; None if it has none
    batch = trainer.place_batch(numpy_batch)  # a global batch held by every process -> jax.Arrays
    trainer.flops_per_step      # model FLOPs of one optimizer step (task.flops_per_step)

Config keys read here: optimizer, learning_rate, train_steps, warmup_steps, schedule,
weight_decay, adam_b1, adam_b2, adam_eps, max_grad_norm, grad_accum_steps, batch_warmup_start,
batch_warmup_steps, seed, logical_axis_rules. The step: during batch-size warmup, the rows past
b(step) weighted 0 (bert_jax.train.schedules; metric `batch_size`); microbatched gradients
(lax.scan over `grad_accum_steps` slices of the global batch, f32 accumulation), global-norm
clip, optimizer update; if the loss or the gradient norm or the update is not finite the update
is skipped and counted (`nonfinite_consecutive`).

The learning-rate schedule's numbers (peak, steps, warmup) and a task head's rate factor are the
jitted step's third input, not constants of its program: runs of one model and batch that differ
only in them (a rate choice, another task length, the next fine-tuning of a sweep) share one
compiled step: from the persistent cache across processes, and within a process, traced and
lowered once, for the trainers built inside `bert_jax.train.shared_steps.shared_steps()` (a
sweep's runs, an ablation table's jobs), which reuse the jitted functions of an earlier trainer
of the same program.
`train_step(state, batch)` passes this run's numbers; the arithmetic is the same either way.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.core import meta
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bert_jax.model.layers import activation_rules
from bert_jax.objectives.losses import DENOMINATORS
from bert_jax.train import mesh as mesh_lib
from bert_jax.train import shared_steps
from bert_jax.train.optimizer import (
    freeze_paths,
    make_optimizer,
    optimizer_numbers,
    scale_outside,
)
from bert_jax.train.schedules import batch_warmup_rows, weigh_rows
from bert_jax.train.settings import train_settings
from bert_jax.train.task import Batch, Task


@flax.struct.dataclass
class TrainState:
    step: jax.Array  # int32 scalar: optimizer steps taken (= batches consumed)
    params: Any
    opt_state: Any
    rng: jax.Array  # uint32[2] base key; step keys are fold_in(rng, step), so resume is exact
    nonfinite_consecutive: jax.Array  # int32: skipped updates in a row
    nonfinite_total: jax.Array  # int32: skipped updates overall


@dataclasses.dataclass
class Trainer:
    task: Task
    mesh: Mesh
    rules: tuple
    # The optimizer and schedule from the schedule's numbers (Python, or traced in the step).
    make_tx: Callable[[Mapping[str, Any]], tuple[optax.GradientTransformation, optax.Schedule]]
    numbers: dict[str, float]  # this run's: the step's third input
    grad_accum_steps: int
    seed: int
    # Batch-size warmup: step -> the rows of the global batch that count (None: all of them).
    batch_rows: Callable[[jax.Array], jax.Array] | None = None
    # threefry, or rbg / unsafe_rbg (XLA's RngBitGenerator draws the masks); auto: unsafe_rbg on
    # TPU (the hardware generator, as T5X does), threefry elsewhere
    dropout_prng: str = "auto"
    # A trainer of the same program whose jitted functions this one reuses (shared_steps).
    like: Trainer | None = None
    state_shardings: TrainState = dataclasses.field(init=False)
    batch_shardings: dict[str, NamedSharding] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        rep = mesh_lib.replicated(self.mesh)
        if self.like is not None:  # the same program (bert_jax.train.shared_steps): reuse its
            self._jitted = self.like._jitted  # jitted functions, traced and lowered once
            self.state_shardings = self.like.state_shardings
            self.batch_shardings = self.like.batch_shardings
            self._abstract = self.like._abstract
            self.like = None  # keep no chain of earlier trainers alive
        else:
            boxed = jax.eval_shape(self._init_boxed, jax.random.PRNGKey(self.seed))
            self.state_shardings = mesh_lib.logical_shardings(boxed, self.mesh, self.rules)
            self._abstract = meta.unbox(boxed)
            bs = mesh_lib.batch_sharding(self.mesh)
            self.batch_shardings = {k: bs for k in self.task.init_inputs()}
            self._jitted = self._jit(rep)
        self.train_step = TrainStep(self._jitted["train"], self.numbers, rep)
        self.eval_step = self._jitted["eval"]
        self.predict_step = self._jitted.get("predict")

    def _jit(self, rep: NamedSharding) -> dict[str, Any]:
        """The jitted functions of this trainer's program (shared by trainers of the same one)."""
        params, batch = self.state_shardings.params, self.batch_shardings
        jitted = {
            "train": jax.jit(
                self._with_rules(self._train_step),
                in_shardings=(self.state_shardings, batch, rep),
                out_shardings=(self.state_shardings, rep),
                donate_argnums=(0,),
            ),
            "eval": jax.jit(
                self._with_rules(self._eval_step), in_shardings=(params, batch), out_shardings=rep
            ),
            "init": jax.jit(self._init_unboxed, out_shardings=self.state_shardings),
            "init_with": jax.jit(self._init_with_params, out_shardings=self.state_shardings),
        }
        if hasattr(self.task, "predict"):  # fine-tuning heads: logits for the dev/test metrics
            jitted["predict"] = jax.jit(
                self._with_rules(self.task.predict), in_shardings=(params, batch), out_shardings=rep
            )
        return jitted

    @property
    def tx(self) -> optax.GradientTransformation:
        """The optimizer with this run's numbers as constants (its state's layout is the step's)."""
        return self.make_tx(self.numbers)[0]

    def _with_rules(self, fn):
        """Trace `fn` with this mesh and the logical rules in context, so the model's activation
        constraints (`bert_jax.model.layers.constrain_batch`) bind to mesh axes."""

        @functools.wraps(fn)
        def traced(*args, **kwargs):
            with (
                jax.sharding.use_abstract_mesh(self.mesh.abstract_mesh),
                activation_rules(self.rules),
            ):
                return fn(*args, **kwargs)

        return traced

    # ---- state -----------------------------------------------------------------------------
    def _init_boxed(self, rng: jax.Array) -> TrainState:
        init_rng, dropout_rng = jax.random.split(rng)
        dummy = {k: jnp.zeros(s.shape, s.dtype) for k, s in self.task.init_inputs().items()}
        # Traced for the mesh, as the step is: a TPU kernel (Splash) is chosen for its devices.
        variables = self._with_rules(self.task.model.init)(
            {"params": init_rng, "dropout": dropout_rng},
            **self.task.model_inputs(dummy),
            deterministic=True,
        )
        params = variables["params"]
        return TrainState(
            step=jnp.zeros((), jnp.int32),
            params=params,
            opt_state=self.tx.init(params),
            rng=jax.random.fold_in(rng, 1),
            nonfinite_consecutive=jnp.zeros((), jnp.int32),
            nonfinite_total=jnp.zeros((), jnp.int32),
        )

    def abstract_state(self) -> TrainState:
        """ShapeDtypeStructs with this mesh's shardings: AOT lowering and Orbax restore targets."""
        # Frozen parameters (distillation's teacher) have an empty optax MaskedNode as optimizer
        # state where the sharding tree holds one sharding for the whole subtree.
        return jax.tree.map(
            lambda x, s: x if isinstance(x, optax.MaskedNode)
            else jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
            self._abstract,
            self.state_shardings,
            is_leaf=lambda x: isinstance(x, optax.MaskedNode),
        )  # fmt: skip

    def batch_specs(self) -> dict[str, jax.ShapeDtypeStruct]:
        return {
            k: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=self.batch_shardings[k])
            for k, s in self.task.init_inputs().items()
        }

    def init_state(self, params: Any = None) -> TrainState:
        """Fresh state from `seed`; with `params` (an unboxed tree of the model's layout, or a
        function fresh_params -> params) the weights are replaced and the optimizer state is
        initialised for them.

        The function gets the fresh tree as `jax.ShapeDtypeStruct`s and returns it with host
        arrays (numpy, the same on every process) where weights are given; the leaves it leaves
        as ShapeDtypeStructs keep their fresh initialisation. Nothing is gathered onto a host:
        each process places only its own shards of the given arrays, so FSDP-sharded models
        spanning several hosts start from a checkpoint too."""
        rng = jax.random.PRNGKey(self.seed)
        if params is None:
            return self._jitted["init"](rng)
        if callable(params):  # e.g. graft pretrained weights into freshly initialised ones
            params = params(self._abstract.params)
        given = jax.tree.map(
            lambda a, s: None if isinstance(a, jax.ShapeDtypeStruct) else _place(a, s),
            params,
            self.state_shardings.params,
        )
        return self._jitted["init_with"](rng, given)

    def _init_unboxed(self, rng: jax.Array) -> TrainState:
        return meta.unbox(self._init_boxed(rng))

    def _init_with_params(self, rng: jax.Array, given: Any) -> TrainState:
        """Fresh state with the given weights (None leaves: the fresh ones) and the optimizer
        state initialised for them."""
        state = meta.unbox(self._init_boxed(rng))
        p = jax.tree.map(
            lambda fresh, g: fresh if g is None else g.astype(fresh.dtype),
            state.params,
            given,
            is_leaf=lambda x: x is None,
        )
        return state.replace(params=p, opt_state=self.tx.init(p))

    def place_batch(self, batch: Batch) -> Batch:
        """A global batch of host arrays (the same on every process, as fine-tuning's in-memory
        data) -> global jax.Arrays on this mesh, each process putting only its own rows. Arrays
        that already are global (the pretraining input's) pass through."""
        return {k: _place(v, self.batch_shardings[k]) for k, v in batch.items()}

    @property
    def flops_per_step(self) -> float:
        b = next(iter(self.task.init_inputs().values())).shape[0]
        return self.task.flops_per_step(b)

    # ---- step ------------------------------------------------------------------------------
    def _grads(self, params: Any, batch: Batch, rng: jax.Array):
        grad_fn = jax.value_and_grad(self.task.loss_fn, has_aux=True)
        n = self.grad_accum_steps
        if n == 1:
            (loss, metrics), grads = grad_fn(params, batch, rng, False)
            return loss, metrics, grads

        spec = PartitionSpec(None, mesh_lib.BATCH_AXES)

        def split(x):
            x = x.reshape((n, x.shape[0] // n) + x.shape[1:])
            return jax.lax.with_sharding_constraint(x, NamedSharding(self.mesh, spec))

        micro = jax.tree.map(split, dict(batch))
        # Full-batch denominators, 1/n per microbatch: the n microbatch means then average to the
        # full batch's weighted mean even when microbatches hold different numbers of targets.
        denominators_fn = getattr(self.task, "loss_denominators", None)
        shares = {}
        if denominators_fn is not None:
            shares = {k: v / n for k, v in denominators_fn(batch).items()}

        def body(acc, i):
            mb = jax.tree.map(lambda x: x[i], micro)
            if shares:
                mb[DENOMINATORS] = shares
            (loss, metrics), grads = grad_fn(params, mb, jax.random.fold_in(rng, i), False)
            acc = jax.tree.map(lambda a, b: a + b.astype(jnp.float32), acc, (loss, metrics, grads))
            return acc, None

        first = jax.tree.map(lambda x: x[0], micro)
        if shares:
            first[DENOMINATORS] = shares
        (_, m0), g0 = jax.eval_shape(lambda p, b, r: grad_fn(p, b, r, False), params, first, rng)
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), (jnp.zeros(()), m0, g0))
        acc, _ = jax.lax.scan(body, zeros, jnp.arange(n))
        return jax.tree.map(lambda a: a / n, acc)

    def _train_step(
        self, state: TrainState, batch: Batch, numbers: Mapping[str, jax.Array]
    ) -> tuple[TrainState, dict]:
        tx, lr_schedule = self.make_tx(numbers)
        rng = jax.random.fold_in(state.rng, state.step)
        impl = self.dropout_prng
        if impl == "auto":
            impl = "unsafe_rbg" if self.mesh.devices.flat[0].platform == "tpu" else "threefry"
        if impl != "threefry":  # a key of XLA's generator, seeded from the step's
            rng = jax.random.wrap_key_data(jax.random.bits(rng, (4,), jnp.uint32), impl=impl)
        rows = None
        if self.batch_rows is not None:  # before the split: microbatches share the denominators
            rows = self.batch_rows(state.step)
            batch = weigh_rows(batch, rows)
        loss, metrics, grads = self._grads(state.params, batch, rng)
        grad_norm = optax.tree.norm(grads)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        # The result is checked too: a finite gradient can still give a non-finite update (a NaN
        # or overflowing learning rate, optimizer state that overflowed).
        finite = (
            jnp.isfinite(loss) & jnp.isfinite(grad_norm) & jnp.isfinite(optax.tree.norm(updates))
        )
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)
        skipped = (~finite).astype(jnp.int32)
        new_state = state.replace(
            step=state.step + 1,
            params=keep(params, state.params),
            opt_state=keep(opt_state, state.opt_state),
            nonfinite_consecutive=jnp.where(finite, 0, state.nonfinite_consecutive + 1),
            nonfinite_total=state.nonfinite_total + skipped,
        )
        metrics = dict(metrics)
        metrics.update(
            loss=loss,
            grad_norm=grad_norm,
            learning_rate=jnp.asarray(lr_schedule(state.step), jnp.float32),
            update_skipped=skipped,
            nonfinite_consecutive=new_state.nonfinite_consecutive,
        )
        if rows is not None:
            metrics["batch_size"] = rows.astype(jnp.float32)
        return new_state, metrics

    def _eval_step(self, params: Any, batch: Batch) -> dict:
        loss, metrics = self.task.loss_fn(params, batch, jax.random.PRNGKey(0), True)
        return dict(metrics, loss=loss)


class TrainStep:
    """`trainer.train_step`: the jitted step (state, batch, numbers) called with this run's
    numbers, placed on the mesh once (replicated: every process holds the same)."""

    def __init__(self, jitted: Any, numbers: Mapping[str, float], sharding: NamedSharding):
        self.jitted, self.sharding = jitted, sharding
        self.numbers = {k: np.float32(v) for k, v in numbers.items()}
        self._placed: dict[str, jax.Array] | None = None

    def __call__(self, state: TrainState, batch: Batch) -> tuple[TrainState, dict]:
        if self._placed is None:
            self._placed = {k: _place(v, self.sharding) for k, v in self.numbers.items()}
        return self.jitted(state, batch, self._placed)

    def lower(self, state: Any, batch: Any) -> Any:
        """The step's lowering for these state and batch specs (AOT compilation)."""
        specs = {
            k: jax.ShapeDtypeStruct((), np.float32, sharding=self.sharding) for k in self.numbers
        }
        return self.jitted.lower(state, batch, specs)


def _place(x: Any, sharding: NamedSharding) -> jax.Array:
    """A host array (the same on every process) as a global array: each process puts only the
    shards its own devices hold."""
    if isinstance(x, jax.Array):
        return jax.device_put(x, sharding) if x.is_fully_addressable else x
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def build_trainer(config: Any, task: Task, mesh: Mesh) -> Trainer:
    """config: the training config or its TrainSettings (bert_jax.train.settings)."""
    settings = train_settings(config)
    numbers = optimizer_numbers(settings)
    # New layers at their own rate (fine-tuning's head_learning_rate): the encoder's stays.
    head = getattr(task, "head_lr_scale", 1.0)
    if head != 1.0:
        numbers["head_lr_scale"] = head
    frozen = getattr(task, "frozen_paths", ())

    def make_tx(n: Mapping[str, Any]) -> tuple[optax.GradientTransformation, optax.Schedule]:
        tx, lr = make_optimizer(settings, {k: v for k, v in n.items() if k != "head_lr_scale"})
        # Weights a task runs but never trains (a distillation teacher): no update, no state.
        if frozen:
            tx = freeze_paths(tx, frozen)
        if "head_lr_scale" in n:
            tx = optax.chain(tx, scale_outside(task.encoder_scope, n["head_lr_scale"]))
        return tx, lr

    accum = settings.grad_accum_steps
    b = next(iter(task.init_inputs().values())).shape[0]
    mesh_lib.check_batch(b, mesh, accum)
    rows = batch_warmup_rows(
        settings.batch_warmup_start, settings.batch_warmup_steps, task.init_inputs(),
        mesh.shape["data"] * mesh.shape["fsdp"] * accum,
    )  # fmt: skip
    like = shared_steps.find(key := shared_steps.program_key(settings, task, mesh, numbers))
    trainer = Trainer(
        task=task,
        mesh=mesh,
        rules=settings.logical_axis_rules,
        make_tx=make_tx,
        numbers=numbers,
        grad_accum_steps=accum,
        seed=settings.seed,
        batch_rows=rows,
        dropout_prng=settings.dropout_prng,
        like=like,
    )
    if like is None:
        shared_steps.keep(key, trainer)
    return trainer
