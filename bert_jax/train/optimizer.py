"""Optimizers and learning-rate schedules (optax), as the reference and its common fixes.

- `adamw`: optax AdamW (bias-corrected), decay 0.01 on every weight except LayerNorm and biases.
- `adam_reference`: google-research/bert's AdamWeightDecayOptimizer: no bias correction, eps
  outside the sqrt, decoupled decay with the same exclusions.
- `lamb`: LAMB (You et al. 2020, Algorithm 2: bias-corrected moments, trust ratio
  ||w|| / ||update||) for large batches; LayerNorms and biases get neither decay nor the trust
  ratio, as the reference LAMB (google-research/albert) excludes them from both.
- `stable_adamw`: StableAdamW (Wortsman et al. 2023, Algorithm 2; ModernBERT's optimizer): AdamW
  whose learning rate is divided, per parameter tensor, by max(1, RMS(g_t^2 / max(v_t, eps^2)))
  with v_t the bias-corrected second moment including g_t (Adafactor's update clipping); the
  divided rate scales the decoupled weight decay too. Epsilon: squared under the RMS's max (the
  paper's), added outside the sqrt in the update (optax's and the paper's). A scanned `layers`
  leaf is one tensor per layer, so scanned and looped models clip alike.
All are preceded by a global-norm clip (1.0 by default). `layerwise_lr_decay` < 1 (ELECTRA's
fine-tuning: 0.8 for small/base, 0.9 for large) scales layer i's updates by decay^(L - i), the
embeddings' by decay^(L + 1), and leaves heads and pooler at the full rate.

Schedules (`reference`, `linear`, `constant`, `wsd`): bert_jax.train.schedules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from bert_jax.errors import BertJaxError
from bert_jax.train.schedules import SCHEDULES as SCHEDULES  # re-exported
from bert_jax.train.schedules import learning_rate_schedule as learning_rate_schedule
from bert_jax.train.schedules import schedule_numbers, schedule_of_numbers
from bert_jax.train.settings import train_settings

OPTIMIZERS = ("adamw", "adam_reference", "lamb", "stable_adamw")


def decay_mask(params: Any) -> Any:
    """True for weights that get weight decay: not biases (XLNet's LM output bias included; its
    r_w/r_r/r_s_bias are decayed, as xlnet's optimizer includes them by name), not norms (BERT's
    *layer_norm, the encoder-decoder's *_norm RMS/LayerNorm scales and biases)."""

    def keep(path, _) -> bool:
        names = [str(getattr(k, "key", k)).lower() for k in path]
        if names and names[-1] in ("bias", "output_bias", "lm_loss_bias"):
            return False
        return not any("layer_norm" in n or "layernorm" in n or n.endswith("_norm") for n in names)

    return jax.tree_util.tree_map_with_path(keep, params)


class _AdamNoBiasState(NamedTuple):
    mu: Any
    nu: Any


def scale_by_adam_no_bias_correction(
    b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6
) -> optax.GradientTransformation:
    """m / (sqrt(v) + eps) with raw (uncorrected) moments, as the reference optimizer."""

    def init(params):
        zeros = lambda p: jnp.zeros_like(p, dtype=jnp.float32)
        return _AdamNoBiasState(jax.tree.map(zeros, params), jax.tree.map(zeros, params))

    def update(grads, state, params=None):
        del params
        mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state.mu, grads)
        nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g), state.nu, grads)
        updates = jax.tree.map(lambda m, v: m / (jnp.sqrt(v) + eps), mu, nu)
        return updates, _AdamNoBiasState(mu, nu)

    return optax.GradientTransformation(init, update)


class _StableAdamState(NamedTuple):
    adam: optax.ScaleByAdamState
    decay: Any


def update_rms_factor(grads: Any, nu_hat: Any, eps: float) -> Any:
    """1 / max(1, RMS(g^2 / max(v_hat, eps^2))) per tensor (per layer of a scanned `layers`
    leaf, whose leading axis is the layer)."""

    def factor(path, g, v):
        ratio = jnp.square(g.astype(jnp.float32)) / jnp.maximum(v, eps * eps)
        scanned = "layers" in _path_names(path) and g.ndim >= 1
        axes = tuple(range(1, g.ndim)) if scanned else None
        rms = jnp.sqrt(jnp.mean(ratio, axis=axes, keepdims=scanned))
        return 1.0 / jnp.maximum(1.0, rms)

    return jax.tree_util.tree_map_with_path(factor, grads, nu_hat)


def scale_by_stable_adam(
    b1: float, b2: float, eps: float, weight_decay: float, mask: Any
) -> optax.GradientTransformation:
    """StableAdamW before the learning rate: (Adam's update + decoupled weight decay) x the
    per-tensor factor of `update_rms_factor`. optax's own transforms do Adam and the decay; only
    the factor is new, computed from the gradient and Adam's new second moment."""
    adam = optax.scale_by_adam(b1, b2, eps)
    decay = optax.add_decayed_weights(weight_decay, mask=mask)

    def init(params):
        return _StableAdamState(adam.init(params), decay.init(params))

    def update(grads, state, params=None):
        updates, adam_state = adam.update(grads, state.adam, params)
        updates, decay_state = decay.update(updates, state.decay, params)
        correction = 1.0 - b2**adam_state.count  # optax's bias correction of nu
        nu_hat = jax.tree.map(lambda v: v / correction, adam_state.nu)
        factors = update_rms_factor(grads, nu_hat, eps)
        updates = jax.tree.map(lambda u, f: u * f.astype(u.dtype), updates, factors)
        return updates, _StableAdamState(adam_state, decay_state)

    return optax.GradientTransformation(init, update)


def optimizer_numbers(config: Any) -> dict[str, float]:
    """The numbers of a config's learning-rate schedule (`schedules.schedule_numbers`)."""
    s = train_settings(config)
    return schedule_numbers(
        s.learning_rate, s.train_steps, s.warmup_steps, s.schedule, s.decay_fraction, s.decay_shape
    )


def make_optimizer(
    config: Any, numbers: Mapping[str, Any] | None = None
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """The optimizer and schedule of a config's (or TrainSettings') optimizer, learning_rate,
    train_steps, warmup_steps, schedule, weight_decay, adam_b1/b2/eps, layerwise_lr_decay and
    max_grad_norm (and wsd's decay_fraction, decay_shape). `numbers`: the schedule's numbers
    (`optimizer_numbers`), given as traced values by the train step; by default the config's."""
    s = train_settings(config)
    if numbers is None:
        numbers = optimizer_numbers(s)
    lr = schedule_of_numbers(s.schedule, numbers, s.warmup_steps > 0, s.decay_shape)
    wd, b1, b2, eps = s.weight_decay, s.adam_b1, s.adam_b2, s.adam_eps
    name = s.optimizer
    if name == "adamw":
        tx = optax.adamw(lr, b1=b1, b2=b2, eps=eps, weight_decay=wd, mask=decay_mask)
    elif name == "adam_reference":
        tx = optax.chain(
            scale_by_adam_no_bias_correction(b1, b2, eps),
            optax.add_decayed_weights(wd, mask=decay_mask),
            optax.scale_by_learning_rate(lr),
        )
    elif name == "lamb":
        # optax.lamb applies the trust ratio to every tensor; the reference LAMB (the paper's
        # update as google-research/albert's lamb_optimizer.py runs it) leaves the tensors it
        # does not decay out of the layer adaptation too.
        tx = optax.chain(
            optax.scale_by_adam(b1, b2, eps),
            optax.add_decayed_weights(wd, mask=decay_mask),
            optax.masked(optax.scale_by_trust_ratio(), decay_mask),
            optax.scale_by_learning_rate(lr),
        )
    elif name == "stable_adamw":
        tx = optax.chain(
            scale_by_stable_adam(b1, b2, eps, wd, decay_mask), optax.scale_by_learning_rate(lr)
        )
    else:
        raise BertJaxError(f"optimizer {name!r}: use one of {OPTIMIZERS}")
    if s.layerwise_lr_decay != 1.0:
        tx = optax.chain(tx, scale_by_layer_depth(s.layerwise_lr_decay))
    if s.max_grad_norm:
        tx = optax.chain(optax.clip_by_global_norm(s.max_grad_norm), tx)
    return tx, lr


def _path_names(path) -> list[str]:
    return [str(getattr(k, "key", getattr(k, "name", k))) for k in path]


def layer_depth_multipliers(tree: Any, decay: float) -> Any:
    """decay ** (L + 1 - depth) per leaf: embeddings depth 0, encoder layer i depth i + 1 (a
    scanned `layers` leaf gets one multiplier per layer along its leading axis), everything else
    (pooler, task heads) depth L + 1. Cross-layer shared weights have no single depth: refused."""
    num_layers = 0
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        names = _path_names(path)
        if "shared" in names and "encoder" in names:
            raise BertJaxError(
                "layerwise_lr_decay: the encoder shares its layers (share_layers), so a layer has "
                "no single depth; set layerwise_lr_decay=1.0"
            )
        for n in names:
            if n.startswith("layer_") and n[6:].isdigit():
                num_layers = max(num_layers, int(n[6:]) + 1)
            if n == "layers" and leaf.ndim:
                num_layers = max(num_layers, leaf.shape[0])

    def multiplier(path, leaf):
        names = _path_names(path)
        for n in names:
            if n.startswith("layer_") and n[6:].isdigit():
                return jnp.asarray(decay ** (num_layers - int(n[6:])), leaf.dtype)
            if n == "layers":
                per_layer = decay ** (num_layers - jnp.arange(leaf.shape[0], dtype=jnp.float32))
                return per_layer.astype(leaf.dtype).reshape((-1,) + (1,) * (leaf.ndim - 1))
        if "embeddings" in names:
            return jnp.asarray(decay ** (num_layers + 1), leaf.dtype)
        return jnp.asarray(1.0, leaf.dtype)

    return jax.tree_util.tree_map_with_path(multiplier, tree)


def scale_by_layer_depth(decay: float) -> optax.GradientTransformation:
    """Layer-wise learning-rate decay (ELECTRA, Clark et al. 2020) as a final update scaling, so
    it applies to every optimizer and to decoupled weight decay alike."""
    if not 0.0 < decay <= 1.0:
        raise BertJaxError(f"layerwise_lr_decay={decay}: must be in (0, 1]")

    def update(updates, state, params=None):
        del params
        scale = layer_depth_multipliers(updates, decay)
        return jax.tree.map(lambda u, m: u * m, updates, scale), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def scale_outside(scope: str, factor: float | jax.Array) -> optax.GradientTransformation:
    """Updates of every parameter outside the top-level `scope` (the encoder) times `factor`,
    as a final scaling like `scale_by_layer_depth`: the layers a checkpoint lacks (a task head,
    "+ BiLSTM") train at their own rate while the encoder keeps the run's. `factor` may be
    traced (the train step's input); a Python one is checked."""
    if isinstance(factor, (int, float)) and factor <= 0:
        raise BertJaxError(f"head learning-rate factor {factor}: must be > 0")

    def update(updates, state, params=None):
        del params

        def scaled(path, u):
            return u if _path_names(path)[:1] == [scope] else u * jnp.asarray(factor, u.dtype)

        return jax.tree_util.tree_map_with_path(scaled, updates), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def freeze_paths(
    tx: optax.GradientTransformation, frozen: tuple[tuple[str, ...], ...]
) -> optax.GradientTransformation:
    """`tx` for every parameter except those under a `frozen` path prefix (e.g.
    ("teacher", "bert")), which get zero updates and keep no optimizer state."""

    def labels(params: Any) -> Any:
        def label(path, _):
            keys = tuple(getattr(k, "key", getattr(k, "name", None)) for k in path)
            return "frozen" if any(keys[: len(f)] == f for f in frozen) else "train"

        return jax.tree_util.tree_map_with_path(label, params)

    return optax.multi_transform({"train": tx, "frozen": optax.set_to_zero()}, labels)
