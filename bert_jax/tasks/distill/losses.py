"""The student's loss against the teacher's outputs.

    kl:  T^2 x KL(softmax(teacher / T) || softmax(student / T)), per example (per token for
         tagging; start and end each, averaged, for spans): the soft cross-entropy at temperature
         T less the teacher's entropy (a constant), so the same gradient; T^2 keeps the gradient's
         scale independent of T (Hinton et al. 2015).
    mse: the mean over classes of (student logit - teacher logit)^2 (regression: the one output).

Both are weighted means over the rows (tokens) of a batch with the given weights.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bert_jax.errors import BertJaxError

LOSSES = ("kl", "mse")


def check_loss(kind: str, regression: bool) -> None:
    """One-line refusal of a loss the task cannot take (before any data is read)."""
    if kind not in LOSSES:
        raise BertJaxError(f"config distill.loss={kind!r}: use kl or mse")
    if regression and kind == "kl":
        raise BertJaxError("config distill.loss=kl: a regression task has no distribution; "
                           "use distill.loss=mse")  # fmt: skip


def per_row(student_NxC: jax.Array, teacher_NxC: jax.Array, kind: str, temperature: float):
    """The loss of each row (the last axis holds the classes)."""
    s = student_NxC.astype(jnp.float32)
    t = teacher_NxC.astype(jnp.float32)
    if kind == "mse":
        return jnp.mean(jnp.square(s - t), axis=-1)
    log_p_t = jax.nn.log_softmax(t / temperature, axis=-1)
    log_p_s = jax.nn.log_softmax(s / temperature, axis=-1)
    kl = jnp.sum(jnp.exp(log_p_t) * (log_p_t - log_p_s), axis=-1)
    return kl * temperature**2


def weighted_mean(values: jax.Array, weights: jax.Array) -> jax.Array:
    w = weights.astype(jnp.float32)
    return jnp.sum(values * w) / jnp.maximum(jnp.sum(w), 1e-5)
