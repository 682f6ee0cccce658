"""Runs of one program share their jitted functions inside `shared_steps()` (a sweep's seeds and
rates, a table's arms of one shape): traced once, trained as an unshared trainer trains."""

from __future__ import annotations

import dataclasses

import jax
import ml_collections
import numpy as np

from bert_jax.config import preset
from bert_jax.pretraining.task import PretrainingTask, synthetic_batch
from bert_jax.train import build_trainer, make_mesh
from bert_jax.train.shared_steps import shared_steps

TRACES: list[str] = []  # one entry each time a loss function is traced


class CountingTask(PretrainingTask):
    def loss_fn(self, params, batch, rng, deterministic):
        TRACES.append("train" if not deterministic else "eval")
        return super().loss_fn(params, batch, rng, deterministic)


@dataclasses.dataclass
class TaskWithTable(CountingTask):
    table: np.ndarray | None = None  # arrays: not comparable by value, so never shared


def _config(**kw) -> ml_collections.ConfigDict:
    c = dict(optimizer="adamw", learning_rate=1e-3, train_steps=10, warmup_steps=2, seed=0,
             mesh=dict(data=1, fsdp=1, tensor=1))  # fmt: skip
    return ml_collections.ConfigDict(c | kw)


def _task(cls=CountingTask, **kw) -> PretrainingTask:
    return cls(preset("tiny", vocab_size=128, max_position_embeddings=32), 4, 16, 3, **kw)


def _train(trainer, steps: int = 2):
    state = trainer.init_state()
    for s in range(steps):
        state, metrics = trainer.train_step(state, synthetic_batch(trainer.task, s))
    return jax.device_get(state.params), float(metrics["learning_rate"])


def test_a_sweeps_runs_trace_once_and_train_as_unshared_ones():
    mesh = make_mesh(ml_collections.ConfigDict(dict(data=1, fsdp=1, tensor=1)), jax.devices()[:1])
    other = _config(seed=3, learning_rate=5e-4, train_steps=7, warmup_steps=1)  # numbers, seed
    alone = build_trainer(other, _task(), mesh)
    TRACES.clear()
    expected, expected_lr = _train(alone)
    assert TRACES == ["train"]
    with shared_steps():
        first = build_trainer(_config(), _task(), mesh)
        _train(first)
        second = build_trainer(other, _task(), mesh)  # equal task, another object
        assert second.train_step.jitted is first.train_step.jitted
        TRACES.clear()
        params, lr = _train(second)
        assert TRACES == []  # neither traced nor lowered again
        # Other programs are not shared: a task of another shape, another optimizer setting,
        # no warmup at all (the schedule's program changes), a task holding arrays.
        for cfg, task in ((_config(), _task(objective="mlm")),
                          (_config(max_grad_norm=0.5), _task()),
                          (_config(warmup_steps=0), _task()),
                          (_config(), _task(TaskWithTable, table=np.zeros(3))),
                          (_config(), _task(TaskWithTable, table=np.zeros(3)))):  # fmt: skip
            assert build_trainer(cfg, task, mesh).train_step.jitted is not first.train_step.jitted
    # The shared step trained with this run's seed and schedule, bit for bit the unshared one's.
    assert lr == expected_lr
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(a, b)
    # Outside the scope every trainer has its own functions again.
    again = build_trainer(_config(), _task(), mesh)
    assert again.train_step.jitted is not first.train_step.jitted
