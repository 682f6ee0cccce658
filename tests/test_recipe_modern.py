"""ModernBERT's training recipe in the shared trainer: StableAdamW against a plain-numpy version of
Wortsman et al. 2023's Algorithm 2 (written here from the paper, in its debiased-beta form, not
optax's), the warmup-stable-decay schedule against its formula, batch-size warmup (b(t), and the
rows past it counting for nothing in the real pretraining loss), bad values named, and one tiny
pretraining run with all three that logs them and resumes bitwise."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from bert_jax.checkpoint import Checkpointer
from bert_jax.config import preset
from bert_jax.errors import BertJaxError
from bert_jax.pretraining.task import PretrainingTask, synthetic_batch
from bert_jax.train import train
from bert_jax.train.optimizer import freeze_paths, make_optimizer, scale_outside
from bert_jax.train.schedules import (
    batch_size_schedule,
    batch_warmup_rows,
    learning_rate_schedule,
)
from bert_jax.train.settings import train_settings

LR, WD, B1, B2, EPS = 1e-2, 0.1, 0.9, 0.98, 1e-6


def _config(**kw) -> ml_collections.ConfigDict:
    c = dict(optimizer="stable_adamw", learning_rate=LR, schedule="constant", train_steps=100,
             warmup_steps=0, weight_decay=WD, adam_b1=B1, adam_b2=B2, adam_eps=EPS,
             max_grad_norm=0.0, seed=0, mesh=dict(data=1, fsdp=1, tensor=1))  # fmt: skip
    c.update(kw)
    return ml_collections.ConfigDict(c)


def _tree(rs: np.random.RandomState) -> dict:
    """Two encoder layers (for layerwise decay), embeddings, a head; biases are not decayed."""
    layer = lambda: {"kernel": rs.randn(4, 3), "bias": rs.randn(3)}
    return {
        "encoder": {"layer_0": layer(), "layer_1": layer()},
        "embeddings": {"word_embeddings": rs.randn(5, 4)},
        "head": {"kernel": rs.randn(4, 2)},
    }


def _numpy_stable_adamw(params, grads_seq, lr, multipliers):
    """The paper's StableAdamW per tensor, float64: debiased betas b(t) = b (1 - b^(t-1)) /
    (1 - b^t), RMS_t = sqrt(mean(g^2 / max(v_t, eps^2))), eta_t = lr / max(1, RMS_t),
    theta -= eta_t (u_t / (sqrt(v_t) + eps) + wd theta) x the layerwise multiplier.
    Returns the parameters after every step and each tensor's eta_t / lr."""
    flat, treedef = jax.tree.flatten_with_path(params)
    theta = [np.asarray(x, np.float64) for _, x in flat]
    decayed = [jax.tree_util.keystr(p).split("'")[-2] != "bias" for p, _ in flat]
    u = [np.zeros_like(x) for x in theta]
    v = [np.zeros_like(x) for x in theta]
    history, factors = [], []
    for t, grads in enumerate(grads_seq, start=1):
        g_all = [np.asarray(g, np.float64) for g in jax.tree.leaves(grads)]
        step_factors = []
        for i, g in enumerate(g_all):
            b1 = B1 * (1 - B1 ** (t - 1)) / (1 - B1**t)
            b2 = B2 * (1 - B2 ** (t - 1)) / (1 - B2**t)
            u[i] = b1 * u[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            rms = math.sqrt(np.mean(g * g / np.maximum(v[i], EPS**2)))
            eta = lr / max(1.0, rms)
            step = u[i] / (np.sqrt(v[i]) + EPS) + (WD * theta[i] if decayed[i] else 0.0)
            theta[i] = theta[i] - eta * step * multipliers[i]
            step_factors.append(eta / lr)
        history.append(jax.tree.unflatten(treedef, [x.copy() for x in theta]))
        factors.append(step_factors)
    return history, np.asarray(factors)


def _run_optax(tx, params, grads_seq):
    params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), params)
    state = tx.init(params)
    update = jax.jit(tx.update)
    out = []
    for grads in grads_seq:
        grads = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), grads)
        updates, state = update(grads, state, params)
        params = optax.apply_updates(params, updates)
        out.append(jax.device_get(params))
    return out


def _assert_trees_close(got, want, atol):
    for (path, a), b in zip(jax.tree.leaves_with_path(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=atol, err_msg=jax.tree_util.keystr(path))


def test_stable_adamw_matches_the_papers_algorithm_with_layerwise_decay():
    rs = np.random.RandomState(0)
    params = _tree(rs)
    grads_seq = [jax.tree.map(lambda x: rs.randn(*x.shape), params) for _ in range(4)]
    # A spike in one tensor at step 4: its RMS(g^2 / v) > 1, so its rate is divided.
    grads_seq[3]["encoder"]["layer_1"]["kernel"] *= 40.0
    tx, _ = make_optimizer(_config(layerwise_lr_decay=0.8))
    # Leaf order: embeddings, layer_0 (bias, kernel), layer_1 (bias, kernel), head.
    multipliers = [0.8**3, 0.8**2, 0.8**2, 0.8, 0.8, 1.0]
    want, factors = _numpy_stable_adamw(params, grads_seq, LR, multipliers)
    got = _run_optax(tx, params, grads_seq)
    for g, w in zip(got, want, strict=True):
        _assert_trees_close(g, w, atol=1e-6)
    assert factors[3][4] < 0.6  # the spiked tensor's rate is about halved at step 4 ...
    assert factors[3][5] > 0.98  # ... the head's beside it barely: the clipping is per tensor


def test_stable_adamw_is_adamw_when_updates_are_never_clipped():
    rs = np.random.RandomState(1)
    params = _tree(rs)
    base = jax.tree.map(lambda x: rs.randn(*x.shape), params)
    # Shrinking gradients: g_t^2 <= v_t, so RMS <= 1 and the rate is never divided.
    grads_seq = [jax.tree.map(lambda g, t=t: g * 0.7**t, base) for t in range(5)]
    _, factors = _numpy_stable_adamw(params, grads_seq, LR, [1.0] * 6)
    assert np.all(factors == 1.0)
    stable = _run_optax(make_optimizer(_config())[0], params, grads_seq)
    adamw = _run_optax(make_optimizer(_config(optimizer="adamw"))[0], params, grads_seq)
    for a, b in zip(stable, adamw, strict=True):
        _assert_trees_close(a, b, atol=1e-7)


def test_stable_adamw_clips_a_scanned_stack_per_layer_and_leaves_frozen_weights_alone():
    rs = np.random.RandomState(2)
    looped = {"encoder": {f"layer_{i}": {"kernel": rs.randn(3, 3)} for i in range(2)}}
    grads = [jax.tree.map(lambda x: rs.randn(*x.shape), looped) for _ in range(3)]
    grads[2]["encoder"]["layer_1"]["kernel"] *= 30.0  # only layer 1 spikes
    stack = lambda t: {"encoder": {"layers": {"kernel": np.stack(
        [t["encoder"][f"layer_{i}"]["kernel"] for i in range(2)])}}}  # fmt: skip
    tx = make_optimizer(_config())[0]
    got_looped = _run_optax(tx, looped, grads)[-1]
    got_scanned = _run_optax(tx, stack(looped), [stack(g) for g in grads])[-1]
    _assert_trees_close(got_scanned, stack(got_looped), atol=1e-7)

    teacher = {"kernel": rs.randn(2, 2)}
    frozen_tx = freeze_paths(tx, (("teacher",),))
    with_teacher = _run_optax(
        frozen_tx, {**looped, "teacher": teacher},
        [{**g, "teacher": jax.tree.map(np.ones_like, teacher)} for g in grads],
    )[-1]  # fmt: skip
    np.testing.assert_array_equal(with_teacher["teacher"]["kernel"], np.float32(teacher["kernel"]))
    _assert_trees_close(with_teacher["encoder"], got_looped["encoder"], atol=0)


def test_head_learning_rate_scales_only_the_layers_outside_the_encoder():
    """fine-tuning's head_learning_rate: adam's step is lr whatever the gradient's size, so with
    the same gradients the head moves `factor` times as far as the encoder, which keeps lr."""
    params = {"bert": {"w": jnp.ones(3)}, "bilstm": {"w": jnp.ones(3)}, "classifier": jnp.ones(2)}
    grads = jax.tree.map(lambda p: 0.3 * p, params)
    tx = optax.chain(optax.adam(1e-4), scale_outside("bert", 10.0))
    updates, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(updates["bert"]["w"], -1e-4, rtol=1e-4)
    np.testing.assert_allclose(updates["bilstm"]["w"], -1e-3, rtol=1e-4)
    np.testing.assert_allclose(updates["classifier"], -1e-3, rtol=1e-4)
    with pytest.raises(BertJaxError, match="must be > 0"):
        scale_outside("bert", 0.0)


@pytest.mark.parametrize("shape", ["linear", "1-sqrt"])
def test_wsd_schedule_follows_its_formula(shape):
    peak, total, warmup, fraction = 3e-4, 100, 10, 0.25  # decay over steps 75..100
    _, lr = make_optimizer(
        _config(
            schedule="wsd",
            learning_rate=peak,
            train_steps=total,
            warmup_steps=warmup,
            decay_fraction=fraction,
            decay_shape=shape,
        )  # fmt: skip
    )
    decay = (lambda p: p) if shape == "linear" else math.sqrt
    for step in (0, 1, 5, 9, 10, 40, 74, 75, 76, 80, 90, 99, 100, 120):
        if step < warmup:
            want = peak * step / warmup
        elif step < 75:
            want = peak
        else:
            want = peak * (1 - decay(min((step - 75) / 25, 1.0)))
        assert float(lr(step)) == pytest.approx(want, rel=1e-5, abs=1e-12), step
    assert float(lr(80)) != pytest.approx(float(lr(75)))  # the decay has begun


def test_batch_size_grows_linearly_in_multiples_of_the_mesh_and_reaches_the_full_batch():
    rows = jax.jit(batch_size_schedule(64, 8, 10, granularity=4))
    for step in range(14):
        want = 64 if step >= 10 else 8 + 4 * (14 * step // 10)  # 14 increments of 4 rows
        assert int(rows(step)) == want, step
    assert [int(rows(s)) for s in (0, 5, 9)] == [8, 36, 56]


@pytest.mark.parametrize(
    "keys, message",
    [
        (dict(decay_shape="cosine"), r"config.decay_shape='cosine': use one of"),
        (dict(decay_fraction=0.0), r"config.decay_fraction=0.0: must be in \(0, 1\]"),
        (dict(decay_fraction=1.5), r"config.decay_fraction=1.5"),
        (dict(schedule="wsd", warmup_steps=95, decay_fraction=0.1),
         r"config.decay_fraction=0.1: 10 decay steps after warmup_steps=95 exceed train_steps"),
        (dict(batch_warmup_start=-2), r"config.batch_warmup_start=-2: must be >= 0"),
        (dict(batch_warmup_start=4), r"config.batch_warmup_steps=0: batch-size warmup needs"),
        (dict(batch_warmup_steps=5), r"config.batch_warmup_start=0: batch-size warmup needs"),
    ],
)  # fmt: skip
def test_bad_recipe_values_are_one_line_naming_the_key(keys, message):
    with pytest.raises(BertJaxError, match=message) as e:
        train_settings(_config(**keys))  # what train() reads before it touches the workdir
    assert "\n" not in str(e.value)


def test_batch_warmup_that_does_not_fit_the_batch_or_the_task_is_named():
    shapes = {"input_ids": jax.ShapeDtypeStruct((16, 8), jnp.int32),
              "example_mask": jax.ShapeDtypeStruct((16,), jnp.float32)}  # fmt: skip
    with pytest.raises(BertJaxError, match=r"batch_warmup_start=32: larger than the global"):
        batch_warmup_rows(32, 10, shapes, 1)
    with pytest.raises(BertJaxError, match=r"batch_warmup_start=6: not a multiple of 4"):
        batch_warmup_rows(6, 10, shapes, 4)
    with pytest.raises(BertJaxError, match=r"batch_warmup_start: this task's batches have no"):
        batch_warmup_rows(4, 10, {"input_ids": shapes["input_ids"]}, 1)
    assert batch_warmup_rows(0, 0, {"input_ids": shapes["input_ids"]}, 1) is None


def _metrics(workdir) -> list[dict]:
    return [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]


def _rows_changed(task, batch: dict, rows: slice, seed: int) -> dict:
    other = synthetic_batch(task, seed)
    return {k: np.concatenate([v[: rows.start], other[k][rows], v[rows.stop :]]) for k, v in
            batch.items()}  # fmt: skip


def test_tiny_pretraining_run_logs_lr_and_batch_and_resumes_bitwise(tmp_path):
    model = preset("L1-H64-A2", vocab_size=128, max_position_embeddings=32)
    task = PretrainingTask(model, 8, 16, 3)
    config = _config(
        schedule="wsd", train_steps=6, warmup_steps=1, decay_fraction=0.5, decay_shape="1-sqrt",
        batch_warmup_start=2, batch_warmup_steps=3, log_every_steps=1, checkpoint_every_steps=3,
        keep_checkpoints=2, async_checkpoints=False,
    )  # fmt: skip
    batches = [synthetic_batch(task, i) for i in range(6)]
    result = train(config, task, str(tmp_path), batches=iter(batches),
                   workdir_config={"bert": model.to_dict()})  # fmt: skip
    logged = _metrics(tmp_path)
    assert [m["step"] for m in logged] == list(range(1, 7))
    assert [m["batch_size"] for m in logged] == [2, 4, 6, 8, 8, 8]
    lr = learning_rate_schedule(LR, 6, 1, "wsd", 0.5, "1-sqrt")
    np.testing.assert_allclose([m["learning_rate"] for m in logged],
                               [float(lr(s)) for s in range(6)], rtol=1e-6)  # fmt: skip
    assert logged[-1]["learning_rate"] == pytest.approx(LR * (1 - math.sqrt(2 / 3)), rel=1e-5)

    # Resumed from the step-3 checkpoint (as the loop resumes) on the run's compiled step: the
    # rows that count and the rate are the step's, so steps 4-6 come out bitwise the same.
    trainer = result.trainer
    ckpt = Checkpointer(tmp_path / "checkpoints", read_only=True, async_save=False)
    saved, _ = ckpt.restore(trainer.abstract_state(), step=3)
    ckpt.close()
    host = jax.device_get(saved)  # placed anew for each use below: the step donates its state
    place = lambda state: jax.device_put(state, trainer.state_shardings)
    state, losses = place(host), []
    for batch in batches[3:]:
        state, m = trainer.train_step(state, trainer.place_batch(batch))
        losses.append(float(m["loss"]))
    assert int(state.step) == 6 and losses == [m["loss"] for m in logged[3:]]
    for a, b in zip(jax.tree.leaves(result.state.params), jax.tree.leaves(state.params),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    # At step 0 only rows 0-1 count: new data in rows 2-7 changes nothing, in row 1 it does.
    at_step_0 = host.replace(step=np.zeros((), np.int32))

    def first_step(batch):
        new, m = trainer.train_step(place(at_step_0), trainer.place_batch(batch))
        return float(m["loss"]), jax.device_get(new.params)

    loss, params = first_step(batches[0])
    loss_rest, params_rest = first_step(_rows_changed(task, batches[0], slice(2, 8), 9))
    loss_row1, _ = first_step(_rows_changed(task, batches[0], slice(1, 2), 9))
    assert loss_rest == loss and loss_row1 != loss
    _assert_trees_close(params_rest, params, atol=0)
