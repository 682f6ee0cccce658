"""Config paths of the pretraining step that the other tests do not reach: scanned + rematerialised
layers (vs the looped model from the same weights), bfloat16 compute (float32 state), LAMB, and
the `mlm` / `mlm_sop` objectives. Tiny model, synthetic reference-schema batches, 1 CPU device."""

from __future__ import annotations

import functools

import jax
import ml_collections
import numpy as np
import pytest

from bert_jax.config import preset
from bert_jax.model.scan import stack_layers, unstack_layers
from bert_jax.pretraining.task import PretrainingTask, synthetic_batch
from bert_jax.train import build_trainer, make_mesh
from bert_jax.train.optimizer import decay_mask

LR = 1e-3


def _config(**kw) -> ml_collections.ConfigDict:
    c = dict(optimizer="adamw", learning_rate=LR, schedule="constant", train_steps=100,
             warmup_steps=0, seed=0, mesh=dict(data=1, fsdp=1, tensor=1))  # fmt: skip
    c.update(kw)
    return ml_collections.ConfigDict(c)


def _task(objective: str = "mlm_nsp", **model) -> PretrainingTask:
    # No dropout: the scanned stack draws per-layer dropout keys differently from the loop.
    cfg = preset("tiny", vocab_size=512, max_position_embeddings=64, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0, **model)  # fmt: skip
    return PretrainingTask(cfg, 8, 32, 5, objective=objective)


@functools.cache
def _mesh():
    return make_mesh(ml_collections.ConfigDict(dict(data=1, fsdp=1, tensor=1)), jax.devices()[:1])


def _trainer(objective: str = "mlm_nsp", opt: str = "adamw", **model):
    return build_trainer(_config(optimizer=opt), _task(objective, **model), _mesh())


def _steps(trainer, params, batches):
    """Train from `params` (numpy tree); return (numpy params after, per-step metrics)."""
    state = trainer.init_state(params=params)
    ms = []
    for b in batches:
        state, m = trainer.train_step(state, b)
        ms.append({k: float(v) for k, v in jax.device_get(m).items()})
    return jax.device_get(state.params), ms


def _leaves_close(a, b, rtol, atol):
    la, lb = jax.tree.leaves_with_path(a), jax.tree.leaves_with_path(b)
    assert [p for p, _ in la] == [p for p, _ in lb]
    for (path, x), (_, y) in zip(la, lb, strict=True):
        np.testing.assert_allclose(
            np.asarray(y), np.asarray(x), rtol=rtol, atol=atol, err_msg=jax.tree_util.keystr(path)
        )


@pytest.fixture(scope="module")
def looped():
    """The plain f32 looped model: its init weights, a fixed batch, grads and 2 steps."""
    trainer = _trainer()
    params = jax.device_get(trainer.init_state().params)
    batches = [synthetic_batch(trainer.task, s) for s in range(2)]
    after, ms = _steps(trainer, params, batches)
    return trainer, params, batches, after, ms, _grads(trainer.task, params, batches[0])


def _grads(task, params, batch):
    fn = jax.jit(jax.value_and_grad(lambda p, b: task.loss_fn(p, b, jax.random.key(0), True)[0]))
    return jax.device_get(fn(params, batch))


@pytest.mark.slow
@pytest.mark.parametrize("remat", ["full", "dots"])
def test_scanned_remat_layers_match_the_loop(looped, remat):
    base, params, batches, after, ms, (loss_l, g_l) = looped
    scanned = _trainer(scan_layers=True, remat_policy=remat)
    stacked = stack_layers(params)
    kernel = stacked["bert"]["encoder"]["layers"]["intermediate"]["kernel"]
    assert kernel.shape == (2, 128, 512)  # 2 layers stacked on a leading axis
    # The layout the scanned trainer builds is exactly the stacked one.
    abstract = jax.tree.map(lambda s: (s.shape, s.dtype), scanned.abstract_state().params)
    assert jax.tree.map(lambda x: (x.shape, x.dtype), stacked) == abstract
    # Loss and every gradient on one batch (remat recomputes the forward in the backward pass).
    loss_s, g_s = _grads(scanned.task, stacked, batches[0])
    np.testing.assert_allclose(loss_s, loss_l, rtol=1e-6)
    # atol: the key bias gradients are mathematically 0 (softmax is shift-invariant), ~1e-12 here.
    _leaves_close(g_l, unstack_layers(g_s), rtol=1e-5, atol=1e-7)
    # Two optimizer steps through the jitted train step.
    after_s, ms_s = _steps(scanned, stacked, batches)
    for m, m_s in zip(ms, ms_s, strict=True):
        np.testing.assert_allclose(m_s["loss"], m["loss"], rtol=1e-6)
        np.testing.assert_allclose(m_s["grad_norm"], m["grad_norm"], rtol=1e-5)
    assert ms[0]["loss"] != ms[1]["loss"]
    _leaves_close(after, unstack_layers(after_s), rtol=1e-5, atol=1e-6)


def _float_dtypes(tree) -> set[str]:
    return {str(x.dtype) for x in jax.tree.leaves(tree) if np.issubdtype(x.dtype, np.floating)}


@pytest.mark.slow
def test_bfloat16_compute_keeps_float32_state_and_trains(looped):
    base, params, batches, _, ms, _ = looped
    bf16 = _trainer(dtype="bfloat16")
    state = bf16.init_state(params=params)
    assert _float_dtypes(state.params) == {"float32"}
    assert _float_dtypes(state.opt_state) == {"float32"}
    # Ten steps on one fixed batch. Step 1's loss is the bf16 forward of the looped fixture's
    # weights on its first batch, so it is compared with the f32 loss there.
    losses, gnorm0 = [], 0.0
    for _ in range(10):
        state, m = bf16.train_step(state, batches[0])
        losses.append(float(m["loss"]))
        assert int(m["update_skipped"]) == 0
        gnorm0 = gnorm0 or float(m["grad_norm"])
    assert np.all(np.isfinite(losses))
    # Measured on CPU: loss 6.93983 vs 6.93981 (2.5e-6 relative: near-uniform logits at init);
    # grad norm 3.2183 vs 3.2243 (1.9e-3). The gradient differs, so bf16 really ran.
    f32 = ms[0]
    assert abs(losses[0] - f32["loss"]) < 1e-3 * f32["loss"], (losses[0], f32["loss"])
    assert 1e-4 < abs(gnorm0 - f32["grad_norm"]) / f32["grad_norm"] < 0.02, (gnorm0, f32)
    assert losses[-1] < losses[0] - 0.5, losses
    assert _float_dtypes(state.params) == {"float32"}
    assert _float_dtypes(state.opt_state) == {"float32"}


def test_lamb_trains_and_scales_each_update_by_the_weight_norm(looped):
    base, params, batches, _, _, _ = looped
    lamb = _trainer(opt="lamb")
    # One step from the same weights: LAMB's layer-wise trust ratio makes |dW| = lr * |W| for
    # every non-zero weight it adapts (not LayerNorms and biases, as the reference LAMB);
    # AdamW's per-element step is ~lr * sign(g) instead.
    after_lamb, _ = _steps(lamb, params, batches[:1])
    after_adam, _ = _steps(base, params, batches[:1])
    ratios_lamb, ratios_adam = [], []
    leaves = [jax.tree.leaves(t) for t in (params, after_adam, after_lamb, decay_mask(params))]
    for w, w_adam, w_lamb, adapted in zip(*leaves, strict=True):
        w_norm = np.linalg.norm(w)
        if w_norm == 0 or not adapted:  # zero weights: trust ratio 1; LayerNorms, biases: none
            continue
        ratios_lamb.append(np.linalg.norm(w_lamb - w) / w_norm)
        ratios_adam.append(np.linalg.norm(w_adam - w) / w_norm)
    np.testing.assert_allclose(ratios_lamb, LR, rtol=1e-3)
    assert np.max(np.abs(np.array(ratios_adam) - LR)) > 5 * LR  # AdamW: ~lr*sign(g) per element
    # Ten steps on a fixed batch: the loss goes down.
    state = lamb.init_state(params=params)
    losses = []
    for _ in range(10):
        state, m = lamb.train_step(state, batches[0])
        losses.append(float(m["loss"]))
    assert np.all(np.diff(losses) < 0) and losses[-1] < losses[0] - 0.05, losses


def test_mlm_only_has_no_sentence_head_or_metrics(looped):
    params = looped[1]
    trainer = _trainer("mlm")
    assert "next_sentence_labels" not in trainer.task.init_inputs()
    layout = trainer.abstract_state().params
    assert "seq_relationship" not in layout and "pooler" not in layout["bert"]
    batch = synthetic_batch(trainer.task, 0)
    assert "next_sentence_labels" not in batch
    # BertForMaskedLM layout: the pretraining weights minus the pooler and the NSP head.
    params = {k: v for k, v in params.items() if k != "seq_relationship"}
    params["bert"] = {k: v for k, v in params["bert"].items() if k != "pooler"}
    _, ms = _steps(trainer, params, [batch])
    assert not [k for k in ms[0] if k.startswith("next_sentence")]
    assert ms[0]["loss"] == pytest.approx(ms[0]["masked_lm_loss"], rel=1e-6)
    assert np.isfinite(ms[0]["grad_norm"]) and ms[0]["grad_norm"] > 0


def test_mlm_sop_reports_the_sentence_metrics(looped):
    trainer = _trainer("mlm_sop")
    params = trainer.abstract_state().params
    assert params["seq_relationship"]["kernel"].shape == (128, 2)
    batch = synthetic_batch(trainer.task, 0)
    batch["next_sentence_labels"] = np.array([0, 1] * 4, np.int32)  # 1 = segments swapped
    _, ms = _steps(trainer, looped[1], [batch, batch])
    m = ms[0]
    # SOP reuses the sentence head (same parameters) and reports under its own metric names.
    assert "next_sentence_loss" not in m
    assert m["loss"] == pytest.approx(m["masked_lm_loss"] + m["sentence_order_loss"], rel=1e-6)
    # The accuracy counts predictions equal to the label: flipping every label gives 1 - it.
    state = trainer.init_state(params=looped[1])
    flipped = dict(batch, next_sentence_labels=1 - batch["next_sentence_labels"])
    acc, acc_flipped = (
        float(trainer.eval_step(state.params, b)["sentence_order_accuracy"])
        for b in (batch, flipped)
    )
    assert acc + acc_flipped == pytest.approx(1.0, abs=1e-6)
    assert 0.3 < m["sentence_order_loss"] < 1.5  # ~ln 2 for a fresh binary head
    assert ms[1]["sentence_order_loss"] < m["sentence_order_loss"]
