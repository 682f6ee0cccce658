"""A fine-tuning model's initial weights, drawn on the host as google-research/bert draws them:
kernels N(0, initializer_range) truncated at 2 std, biases 0, LayerNorm scales 1, a "+ BiLSTM"
head's layers as Flax draws them; the encoder's leaves are zeros, for the checkpoint's weights
to be grafted over (`bert_jax.arch.bert.pretrained.graft_encoder`)."""

from __future__ import annotations

import jax
import numpy as np
from flax.core import meta

from bert_jax.arch import registry


def truncated_normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal samples truncated at +-2 by redrawing the ones outside (as TF's
    truncated_normal; clipping instead would pile 4.6% of them onto the bounds)."""
    w = rng.standard_normal(shape)
    outside = np.abs(w) > 2
    while outside.any():
        w[outside] = rng.standard_normal(int(outside.sum()))
        outside = np.abs(w) > 2
    return w


_RECURRENT_KERNELS = ("hi", "hf", "hg", "ho")  # OptimizedLSTMCell's hidden-to-gate layers


def _flax_default_kernel(rng: np.random.Generator, gate: str, shape: tuple[int, ...]):
    """Flax's own initialisers for a BiLSTM's kernels: recurrent kernels orthogonal, the
    others (input-to-gate, the output dense) LeCun normal truncated at 2 std, as nn.Dense and
    nn.OptimizedLSTMCell draw them. BERT's N(0, 0.02) would leave an LSTM near its zero state
    (its inputs are scaled down 10x against LeCun's 1/sqrt(fan_in) for a 128-wide encoder)."""
    if gate in _RECURRENT_KERNELS:
        q, r = np.linalg.qr(rng.standard_normal(shape))
        return q * np.sign(np.diag(r))
    # 0.8796...: the std of a standard normal truncated at +-2 (jax.nn.initializers' constant).
    return truncated_normal(rng, shape) * np.sqrt(1.0 / shape[0]) / 0.87962566103423978


def fresh_params(
    task, seed: int, initializer_range: float, random_encoder: bool = False,
    encoder_scope: str | None = None,
):  # fmt: skip
    """Initial weights for the task model without compiling its init: the layout comes from
    `jax.eval_shape`; the encoder is overwritten by the checkpoint (zeros here), and the new
    layers (classifier, QA outputs, a pooler the checkpoint lacks) get BERT's init: kernels
    N(0, initializer_range) truncated at 2 std (tf.truncated_normal_initializer: values beyond
    are redrawn), biases 0, LayerNorm scales 1; a "+ BiLSTM" head gets Flax's defaults
    (`_flax_default_kernel`). `random_encoder`: the encoder gets that init
    too (embeddings included), as the randomly initialised model of `random_init`."""
    dummy = {k: np.zeros((1, *s.shape[1:]), s.dtype) for k, s in task.init_inputs().items()}
    key = jax.random.PRNGKey(seed)
    shapes = meta.unbox(
        jax.eval_shape(lambda k: task.model.init(k, **task.model_inputs(dummy)), key)
    )["params"]
    rng = np.random.default_rng(seed)
    if encoder_scope is None:  # the run passes its architecture's; a bare task looks it up
        encoder_scope = registry.for_model_config(task.bert_config).encoder_scope

    def init(path, leaf):
        names = [str(getattr(p, "key", p)) for p in path]
        name = names[-1]
        # The pooler may be absent from a checkpoint.
        from_checkpoint = names[0] == encoder_scope and "pooler" not in names
        from_checkpoint = from_checkpoint and not random_encoder
        if from_checkpoint or name == "bias":
            return np.zeros(leaf.shape, leaf.dtype)
        if name == "scale":
            return np.ones(leaf.shape, leaf.dtype)
        if "bilstm" in names:  # the "+ BiLSTM" layers: Flax's initialisation, not BERT's
            return _flax_default_kernel(rng, names[-2], leaf.shape).astype(leaf.dtype)
        return (truncated_normal(rng, leaf.shape) * initializer_range).astype(leaf.dtype)

    return jax.tree_util.tree_map_with_path(init, shapes)
