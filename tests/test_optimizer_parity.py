"""Our optimizers and schedules (bert_jax.train.optimizer) against code and formulas we did not
write, over several steps of random gradients on a parameter tree with kernels, biases,
LayerNorms and an embedding (global-norm clip 1.0 binding on some steps):

- `adamw` + the `linear` schedule = torch.optim.AdamW + transformers'
  get_linear_schedule_with_warmup + torch's clip_grad_norm_, with the reference's exclusions
  ("LayerNorm", "layer_norm", "bias" in the name) chosen on the torch side by name;
- `adam_reference` + the `reference` schedule = google-research/bert's AdamWeightDecayOptimizer
  (no bias correction, eps outside the sqrt) and its learning-rate formula, written out in numpy;
- `lamb` = LAMB as the paper's Algorithm 2 (You et al. 2020: bias-corrected moments, trust ratio
  ||w|| / ||r + wd w||, 1 where a norm is 0), in numpy, with LayerNorms and biases excluded from
  weight decay *and* from the layer adaptation as the reference LAMB does (google-research/albert
  lamb_optimizer.py: exclude_from_layer_adaptation defaults to exclude_from_weight_decay);
  optax.lamb, which adapts every tensor, equals the same numpy code without the exclusion;
- the `reference` and `linear` schedules at every step against their formulas.
Gradient accumulation against the full batch: tests/test_train_step.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest
import torch
import transformers

from bert_jax.train.optimizer import learning_rate_schedule, make_optimizer

STEPS = 8
# name -> shape; our decay_mask reads the path, the torch side reads the joined name.
SHAPES = {
    "embeddings/word_embeddings/embedding": (11, 6),
    "embeddings/layer_norm/scale": (6,),
    "embeddings/layer_norm/bias": (6,),
    "layer_0/attention/query/kernel": (6, 2, 3),
    "layer_0/attention/query/bias": (2, 3),
    "layer_0/output_layer_norm/scale": (6,),
    "predictions/output_bias": (11,),
}
NO_DECAY = ("LayerNorm", "layer_norm", "bias")  # google-research/bert's exclusions, by name


def _config(name: str, schedule: str, warmup_steps: int = 3) -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict(
        dict(optimizer=name, schedule=schedule, learning_rate=1e-2, train_steps=STEPS,
             warmup_steps=warmup_steps, weight_decay=0.01, adam_b1=0.9, adam_b2=0.999,
             adam_eps=1e-6, max_grad_norm=1.0, layerwise_lr_decay=1.0)
    )  # fmt: skip


def _tree(flat: dict[str, np.ndarray]) -> dict:
    tree: dict = {}
    for name, x in flat.items():
        *parents, leaf = name.split("/")
        node = tree
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = jnp.asarray(x)
    return tree


def _flat(tree: dict) -> dict[str, np.ndarray]:
    return {
        "/".join(str(k.key) for k in path): np.asarray(x, np.float64)
        for path, x in jax.tree_util.tree_flatten_with_path(tree)[0]
    }


def _problem(seed: int = 0):
    """Weights around their usual scales and STEPS gradients, some with global norm above 1."""
    rs = np.random.RandomState(seed)
    params = {k: rs.normal(1.0 if "scale" in k else 0.0, 0.1, s).astype(np.float32)
              for k, s in SHAPES.items()}  # fmt: skip
    grads = [{k: (rs.normal(0, 0.3 if i % 2 else 0.05, s)).astype(np.float32)
              for k, s in SHAPES.items()} for i in range(STEPS)]  # fmt: skip
    return params, grads


def _ours(config, params, grads) -> list[dict[str, np.ndarray]]:
    tx, _ = make_optimizer(config)
    p = _tree(params)
    state = tx.init(p)
    update = jax.jit(tx.update)
    out = []
    for g in grads:
        updates, state = update(_tree(g), state, p)
        p = optax.apply_updates(p, updates)
        out.append(_flat(p))
    return out


def _decays(name: str) -> bool:
    return not any(s in name for s in NO_DECAY)


def _clipped(g: dict[str, np.ndarray], max_norm: float) -> dict[str, np.ndarray]:
    """tf.clip_by_global_norm: g * max_norm / max(norm, max_norm)."""
    norm = np.sqrt(sum(np.sum(np.square(x, dtype=np.float64)) for x in g.values()))
    return {k: x * (max_norm / max(norm, max_norm)) for k, x in g.items()}


def _reference_lr(step: int, peak: float, total: int, warmup: int) -> float:
    """run_pretraining.py's optimization.create_optimizer: polynomial_decay(power 1, end 0) of
    the global step, replaced by peak * step / warmup while step < warmup."""
    decayed = peak * (1.0 - min(step, total) / total)
    if warmup and step < warmup:
        return peak * step / warmup
    return decayed


def test_adamw_and_linear_schedule_match_torch():
    params, grads = _problem()
    config = _config("adamw", "linear")
    ours = _ours(config, params, grads)
    named = {k: torch.nn.Parameter(torch.tensor(v)) for k, v in params.items()}
    opt = torch.optim.AdamW(
        [{"params": [p for k, p in named.items() if _decays(k)], "weight_decay": 0.01},
         {"params": [p for k, p in named.items() if not _decays(k)], "weight_decay": 0.0}],
        lr=1e-2, betas=(0.9, 0.999), eps=1e-6,
    )  # fmt: skip
    sched = transformers.get_linear_schedule_with_warmup(opt, 3, STEPS)
    for step, g in enumerate(grads):
        for k, p in named.items():
            p.grad = torch.tensor(g[k])
        torch.nn.utils.clip_grad_norm_(list(named.values()), 1.0)
        opt.step()
        sched.step()
        for k, p in named.items():
            # measured up to 3.6e-7 after 6 steps: float32 rounding (three ulps of a LayerNorm
            # scale near 1), against decay effects of lr * wd = 1e-4 per step
            np.testing.assert_allclose(ours[step][k], p.detach().numpy(), rtol=0, atol=1e-6,
                                       err_msg=f"step {step} {k}")  # fmt: skip


def test_adam_reference_matches_google_research_bert():
    params, grads = _problem(1)
    config = _config("adam_reference", "reference")
    ours = _ours(config, params, grads)
    p = {k: v.astype(np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(x) for k, x in p.items()}
    for step, g in enumerate(grads):
        g = _clipped(g, 1.0)
        lr = _reference_lr(step, 1e-2, STEPS, 3)
        for k in p:
            m[k] = 0.9 * m[k] + 0.1 * g[k]
            v[k] = 0.999 * v[k] + 0.001 * np.square(g[k])
            update = m[k] / (np.sqrt(v[k]) + 1e-6)
            if _decays(k):
                update = update + 0.01 * p[k]
            p[k] = p[k] - lr * update
            np.testing.assert_allclose(ours[step][k], p[k], rtol=0, atol=3e-7,
                                       err_msg=f"step {step} {k}")  # fmt: skip


def _paper_lamb(params, grads, exclude: bool) -> list[dict[str, np.ndarray]]:
    """You et al. 2020, Algorithm 2 (LAMB), phi = identity, after a global-norm clip; with
    `exclude`, LayerNorms and biases get neither weight decay nor the trust ratio."""
    p = {k: x.astype(np.float64) for k, x in params.items()}
    m = {k: np.zeros_like(x) for k, x in p.items()}
    v = {k: np.zeros_like(x) for k, x in p.items()}
    out = []
    for t, g in enumerate(grads, start=1):
        g = _clipped(g, 1.0)
        lr = _reference_lr(t - 1, 1e-2, STEPS, 0)
        for k in p:
            m[k] = 0.9 * m[k] + 0.1 * g[k]
            v[k] = 0.999 * v[k] + 0.001 * np.square(g[k])
            r = (m[k] / (1 - 0.9**t)) / (np.sqrt(v[k] / (1 - 0.999**t)) + 1e-6)
            adapt = not exclude or _decays(k)
            if adapt:  # decay and adaptation share the exclusion list
                r = r + 0.01 * p[k]
            w_norm, r_norm = np.linalg.norm(p[k]), np.linalg.norm(r)
            ratio = w_norm / r_norm if adapt and w_norm > 0 and r_norm > 0 else 1.0
            p[k] = p[k] - lr * ratio * r
        out.append(dict(p))
    return out


def test_lamb_matches_the_paper_with_the_reference_exclusions():
    params, grads = _problem(2)
    params["layer_0/attention/query/bias"][:] = 0  # a zero weight: trust ratio 1
    ours = _ours(_config("lamb", "reference", warmup_steps=0), params, grads)
    paper = _paper_lamb(params, grads, exclude=True)
    for step in range(STEPS):
        for k in SHAPES:
            # float32 (ours) against float64 (numpy): measured up to 3.5e-7 (three ulps near 1)
            np.testing.assert_allclose(ours[step][k], paper[step][k], rtol=0, atol=1e-6,
                                       err_msg=f"step {step} {k}")  # fmt: skip


def test_optax_lamb_is_the_paper_without_the_exclusions():
    """The plain optax.lamb adapts LayerNorms and biases too: the paper's update applied to every
    tensor, not the reference's."""
    params, grads = _problem(3)
    tx = optax.chain(optax.clip_by_global_norm(1.0),
                     optax.lamb(learning_rate_schedule(1e-2, STEPS, 0), eps=1e-6,
                                weight_decay=0.01, mask=lambda t: jax.tree.map(
                                    lambda _: True, t)))  # fmt: skip
    p = _tree(params)
    state = tx.init(p)
    paper = _paper_lamb({k: x for k, x in params.items()}, grads, exclude=False)
    # The paper's decay here applies to every tensor (mask all True) like its adaptation.
    for step, g in enumerate(grads):
        updates, state = tx.update(_tree(g), state, p)
        p = optax.apply_updates(p, updates)
        for k, x in _flat(p).items():
            np.testing.assert_allclose(x, paper[step][k], rtol=0, atol=1e-6, err_msg=k)
    # A bias of about 0.1 per element: the trust ratio (about 0.1 here) shrinks optax's step
    # tenfold, while the reference moves it by about lr per element.
    ours = _ours(_config("lamb", "reference", warmup_steps=0), params, grads)
    bias = "embeddings/layer_norm/bias"
    assert np.max(np.abs(ours[0][bias] - paper[0][bias])) > 3e-3


@pytest.mark.parametrize("total,warmup", [(100, 10), (37, 0), (10, 10)])
def test_schedules_follow_their_formulas_at_every_step(total, warmup):
    reference = learning_rate_schedule(3e-4, total, warmup, "reference")
    linear = learning_rate_schedule(3e-4, total, warmup, "linear")
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=3e-4)
    hf = transformers.get_linear_schedule_with_warmup(opt, warmup, total)
    for step in range(total + 3):
        want = _reference_lr(step, 3e-4, total, warmup)
        # Computed as the compiled step computes it: step x float32(1/total), so near the end,
        # where 1 - step/total cancels, it is off by up to an ulp of 1 (2^-23) times the peak.
        np.testing.assert_allclose(float(reference(step)), want, rtol=1e-6, atol=3e-4 * 2**-23,
                                   err_msg=f"step {step}")  # fmt: skip
    for step in range(total):  # the steps that train (with warmup = total the two part at step
        # `total`: transformers' 0, ours the peak, which no step uses)
        np.testing.assert_allclose(float(linear(step)), opt.param_groups[0]["lr"], rtol=1e-5,
                                   atol=1e-12, err_msg=f"step {step}")  # fmt: skip
        opt.step()
        hf.step()
