"""The jitted train step: single device vs a 2x2x2 mesh, restore onto another mesh, skipping
non-finite updates, and the reference's optimizer/schedule formulas."""

from __future__ import annotations

import jax
import ml_collections
import numpy as np
import pytest

from bert_jax.config import preset
from bert_jax.errors import BertJaxError
from bert_jax.pretraining.task import PretrainingTask, synthetic_batch
from bert_jax.train import Checkpointer, build_trainer, make_mesh, train
from bert_jax.train.optimizer import decay_mask, learning_rate_schedule, make_optimizer

STEPS = 3


def _config(**kw) -> ml_collections.ConfigDict:
    c = dict(
        optimizer="adamw", learning_rate=1e-3, train_steps=10, warmup_steps=2, seed=0,
        log_every_steps=1, checkpoint_every_steps=2, async_checkpoints=False,
        mesh=dict(data=1, fsdp=1, tensor=1),
    )  # fmt: skip
    c.update(kw)
    return ml_collections.ConfigDict(c)


def _task() -> PretrainingTask:
    return PretrainingTask(preset("tiny", vocab_size=256, max_position_embeddings=64), 8, 32, 5)


def _mesh(data, fsdp, tensor):
    n = data * fsdp * tensor
    return make_mesh(ml_collections.ConfigDict(dict(data=data, fsdp=fsdp, tensor=tensor)),
                     jax.devices()[:n])  # fmt: skip


def _run(trainer, state, seeds):
    losses = []
    for s in seeds:
        state, m = trainer.train_step(state, synthetic_batch(trainer.task, s))
        losses.append(float(m["loss"]))
    return state, losses


@pytest.fixture(scope="module")
def runs():
    task = _task()
    single = build_trainer(_config(), task, _mesh(1, 1, 1))
    sharded = build_trainer(_config(), task, _mesh(2, 2, 2))
    s1, l1 = _run(single, single.init_state(), range(STEPS))
    s8, l8 = _run(sharded, sharded.init_state(), range(STEPS))
    return single, sharded, s1, l1, s8, l8


@pytest.mark.slow
def test_sharded_mesh_matches_single_device(runs):
    single, sharded, s1, l1, s8, l8 = runs
    # The parameters really are split over the mesh (fsdp on embed, tensor on heads/mlp/vocab).
    kernel = s8.params["bert"]["encoder"]["layer_0"]["intermediate"]["kernel"]
    assert kernel.sharding.spec == jax.P("fsdp", "tensor")
    assert len(kernel.addressable_shards) == 8
    assert kernel.addressable_shards[0].data.shape == (64, 256)
    np.testing.assert_allclose(l8, l1, rtol=2e-6)
    assert l1[0] != l1[-1]  # the steps changed something
    for a, b in zip(jax.tree.leaves(s1.params), jax.tree.leaves(s8.params), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=2e-6)


@pytest.mark.slow
def test_restore_onto_a_different_mesh(runs, tmp_path):
    single, sharded, s1, l1, s8, l8 = runs
    ckpt = Checkpointer(tmp_path / "checkpoints", async_save=True)
    ckpt.save(STEPS, s8, {"position": 7})
    ckpt.close()
    ckpt = Checkpointer(tmp_path / "checkpoints")
    restored, input_state = ckpt.restore(single.abstract_state())
    ckpt.close()
    assert input_state == {"position": 7}
    assert int(restored.step) == STEPS
    leaf = restored.params["bert"]["embeddings"]["word_embeddings"]["embedding"]
    assert leaf.sharding.mesh.devices.size == 1
    for a, b in zip(jax.tree.leaves(s8), jax.tree.leaves(restored), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # Training continues identically on the new mesh (Adam moments and step came back too).
    _, cont_single = _run(single, restored, [STEPS])
    _, cont_sharded = _run(sharded, s8, [STEPS])
    np.testing.assert_allclose(cont_single, cont_sharded, rtol=2e-6)


@pytest.mark.slow
def test_nonfinite_update_is_skipped_and_counted(runs):
    single = runs[0]
    state = single.init_state()
    before = jax.device_get(state.params)
    bad = synthetic_batch(single.task, 0)
    bad["masked_lm_weights"] = np.full_like(bad["masked_lm_weights"], np.nan)
    state, m = single.train_step(state, bad)
    state, m = single.train_step(state, bad)
    assert int(m["update_skipped"]) == 1 and int(state.nonfinite_consecutive) == 2
    assert int(state.nonfinite_total) == 2 and int(state.step) == 2
    for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(state.params), strict=True):
        np.testing.assert_array_equal(a, np.asarray(b))
    state, m = single.train_step(state, synthetic_batch(single.task, 1))
    assert int(m["update_skipped"]) == 0 and int(state.nonfinite_consecutive) == 0
    assert int(state.nonfinite_total) == 2


@pytest.mark.slow
def test_loop_stops_after_consecutive_nonfinite_steps_keeping_last_checkpoint(tmp_path):
    task = _task()

    def batches():
        for i in range(100):
            b = synthetic_batch(task, i)
            if i >= 2:
                b["masked_lm_weights"] = np.full_like(b["masked_lm_weights"], np.inf)
            yield b

    config = _config(max_nonfinite_steps=3)
    with pytest.raises(BertJaxError, match="3 consecutive steps with non-finite"):
        train(config, task, str(tmp_path), batches=batches(), mesh=_mesh(1, 1, 1))
    ckpt = Checkpointer(tmp_path / "checkpoints")
    # Saved every 2 steps; steps 3-5 were skipped, the third skip (step 5) stops the run.
    assert ckpt.latest_step() == 4
    ckpt.close()


@pytest.mark.slow
def test_rerun_with_another_config_is_refused_and_config_json_kept(tmp_path):
    task = _task()
    model = {"bert": task.bert_config.to_dict()}
    batches = lambda: (synthetic_batch(task, i) for i in range(100))
    run = dict(workdir_config=model, mesh=_mesh(1, 1, 1))
    train(_config(train_steps=2), task, str(tmp_path), batches=batches(), **run)
    saved = (tmp_path / "config.json").read_text()

    changed = _config(train_steps=2, learning_rate=2e-3, seed=1)
    with pytest.raises(BertJaxError) as e:
        train(changed, task, str(tmp_path), batches=batches(), **run)
    message = str(e.value)
    assert message.startswith(f"{tmp_path}/config.json: this rerun's config differs")
    assert "in learning_rate, seed (learning_rate: 0.001 saved, 0.002 now)" in message
    assert "\n" not in message
    other = {"bert": dict(model["bert"], hidden_size=64)}
    with pytest.raises(BertJaxError, match=r"in bert\.hidden_size \(bert\.hidden_size: 128"):
        train(_config(train_steps=2), task, str(tmp_path), batches=batches(), workdir_config=other,
              mesh=_mesh(1, 1, 1))  # fmt: skip
    assert (tmp_path / "config.json").read_text() == saved

    # How often to log or save may change: the rerun resumes (here: already at its last step).
    result = train(_config(train_steps=2, log_every_steps=7), task, str(tmp_path),
                   batches=batches(), **run)  # fmt: skip
    assert int(result.state.step) == 2


def test_reference_adam_matches_the_reference_formula():
    """google-research/bert optimization.py: m, v without bias correction, eps outside the sqrt,
    decoupled decay except LayerNorm/bias, clip by global norm 1.0, lr = warmup/poly decay."""
    config = _config(optimizer="adam_reference", learning_rate=0.1, train_steps=10, warmup_steps=2,
                     schedule="reference")  # fmt: skip
    tx, _ = make_optimizer(config)
    rs = np.random.RandomState(0)
    params = {"dense": {"kernel": rs.randn(3, 4), "bias": rs.randn(4)},
              "layer_norm": {"scale": rs.randn(4)}}  # fmt: skip
    params = jax.tree.map(lambda x: x.astype(np.float32), params)
    state = tx.init(params)
    p_ref = jax.tree.map(np.array, params)
    m = jax.tree.map(np.zeros_like, params)
    v = jax.tree.map(np.zeros_like, params)
    decay = decay_mask(params)
    p = params
    for step in range(4):
        g = jax.tree.map(lambda x: rs.randn(*x.shape).astype(np.float32) * 3, params)
        updates, state = tx.update(g, state, p)
        p = jax.tree.map(lambda a, u: a + u, p, updates)
        # The reference, in numpy.
        norm = np.sqrt(sum(np.sum(x.astype(np.float64) ** 2) for x in jax.tree.leaves(g)))
        scale = 1.0 / max(norm, 1.0)
        g = jax.tree.map(lambda x, s=scale: x * s, g)
        lr = 0.1 * (1 - step / 10) if step >= 2 else 0.1 * step / 2
        m = jax.tree.map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
        v = jax.tree.map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
        p_ref = jax.tree.map(
            lambda w, a, b, d, lr=lr: w - lr * (a / (np.sqrt(b) + 1e-6) + (0.01 * w if d else 0.0)),
            p_ref, m, v, decay,
        )  # fmt: skip
    for a, b in zip(jax.tree.leaves(p_ref), jax.tree.leaves(p), strict=True):
        np.testing.assert_allclose(np.asarray(b), a, rtol=1e-5, atol=1e-6)


def test_reference_schedule_and_decay_mask():
    lr = learning_rate_schedule(1e-4, 1000, 100, "reference")
    assert float(lr(0)) == 0.0
    np.testing.assert_allclose(float(lr(50)), 5e-5, rtol=1e-6)
    np.testing.assert_allclose(float(lr(100)), 1e-4 * 0.9, rtol=1e-6)  # the reference's drop
    np.testing.assert_allclose(float(lr(1000)), 0.0, atol=1e-12)
    trainer = build_trainer(_config(), _task(), _mesh(1, 1, 1))  # shapes only, nothing compiled
    mask = decay_mask(trainer.abstract_state().params)
    assert mask["bert"]["embeddings"]["word_embeddings"]["embedding"]
    assert mask["bert"]["encoder"]["layer_0"]["attention"]["query"]["kernel"]
    assert not mask["bert"]["encoder"]["layer_0"]["attention"]["query"]["bias"]
    assert not mask["bert"]["encoder"]["layer_0"]["output_layer_norm"]["scale"]
    assert not mask["predictions"]["output_bias"]


def test_runs_differing_in_rate_and_length_share_one_step_with_the_same_arithmetic():
    """The schedule's numbers are the step's input: two runs of one model and batch that differ in
    rate, steps, warmup and head rate lower to one program; and each schedule, jitted with its
    numbers as inputs, gives every step's rate bit for bit as with them as constants (XLA's
    rewrite of x / L into x * (1/L), folded with the peak, is what the numbers reproduce)."""
    from bert_jax.train.schedules import schedule_numbers, schedule_of_numbers

    texts = []
    for lr, steps, warmup in ((1e-3, 10, 2), (3e-4, 1875, 187)):
        trainer = build_trainer(_config(learning_rate=lr, train_steps=steps, warmup_steps=warmup),
                                _task(), _mesh(1, 1, 1))  # fmt: skip
        lowered = trainer.train_step.lower(trainer.abstract_state(), trainer.batch_specs())
        texts.append(lowered.as_text(debug_info=False))
    assert texts[0] == texts[1]
    for kind, peak, total, warmup in (("reference", 7e-4, 1875, 187), ("reference", 5e-5, 37, 0),
                                      ("linear", 3e-3, 8, 3), ("wsd", 1e-3, 313, 31)):  # fmt: skip
        numbers = schedule_numbers(peak, total, warmup, kind, 0.1, "1-sqrt")
        steps = jax.numpy.arange(total + 3)
        constants = jax.jit(jax.vmap(learning_rate_schedule(peak, total, warmup, kind)))(steps)
        traced = jax.jit(lambda s, n, k=kind, w=warmup: jax.vmap(
            schedule_of_numbers(k, n, w > 0))(s))(steps, numbers)  # fmt: skip
        assert np.asarray(traced).tobytes() == np.asarray(constants).tobytes(), kind


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["mlm_nsp", "ltr"])
def test_gradient_accumulation_matches_the_full_batch(objective):
    """Two microbatches inside the jitted step = one full batch, with the masked tokens (MLM) or
    real tokens (LTR) spread unevenly over the halves (no dropout: its masks are drawn per
    microbatch). Normalising each microbatch on its own is off by 4e-3 in the MLM loss here."""
    causal = objective == "ltr"
    cfg = preset("tiny", vocab_size=256, max_position_embeddings=64, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0, causal=causal)  # fmt: skip
    task = PretrainingTask(cfg, 8, 32, 5, objective=objective)
    mesh = _mesh(2, 1, 1)
    full_trainer = build_trainer(_config(), task, mesh)
    accum = build_trainer(_config(grad_accum_steps=2), task, mesh)
    batch = {k: np.array(v) for k, v in synthetic_batch(task, 0).items()}
    if causal:  # first half: full rows; second half: 3 real tokens each
        batch["input_mask"][4:, 3:] = 0
    else:  # first half: 5 masked tokens per row; second half: 1
        batch["masked_lm_weights"][4:, 1:] = 0
    full, m_full = full_trainer.train_step(full_trainer.init_state(), batch)
    micro, m_micro = accum.train_step(accum.init_state(), batch)
    np.testing.assert_allclose(float(m_micro["loss"]), float(m_full["loss"]), rtol=1e-6)
    np.testing.assert_allclose(float(m_micro["grad_norm"]), float(m_full["grad_norm"]), rtol=1e-5)
    for a, b in zip(jax.tree.leaves(full.params), jax.tree.leaves(micro.params), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=2e-6)
