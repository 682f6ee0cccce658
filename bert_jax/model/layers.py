"""Parameter-carrying building blocks with logical axis names, shared by every module.

The logical names (`vocab`, `embed`, `embed_out`, `mlp`, `heads`, `kv`, `layers`, `position`,
`segment`, `classes`, and `embed_factor` for the width of factorised embeddings) are mapped to mesh
axes only by the rules table in the training config; a name without a rule is replicated.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax.linen.linear import PromoteDtypeFn

from bert_jax.config import BertConfig


def compute_dtype(config: BertConfig) -> jnp.dtype:
    return jnp.dtype(config.dtype)


def embed_axis(config: BertConfig) -> str:
    """Logical name of the embedding tables' width: `embed` when it is the hidden size; a
    factorised width (ALBERT's E=128) gets its own name, so that the rule sharding `embed` over
    FSDP does not have to divide it."""
    return "embed" if config.embedding_size is None else "embed_factor"


def weight_init(config: BertConfig, axes: tuple[str, ...]) -> nn.initializers.Initializer:
    """Truncated normal (stddev = initializer_range) as the reference, tagged with logical axes."""
    return nn.with_logical_partitioning(
        jax.nn.initializers.truncated_normal(config.initializer_range), axes
    )


def zeros_init(axes: tuple[str, ...]) -> nn.initializers.Initializer:
    return nn.with_logical_partitioning(nn.initializers.zeros_init(), axes)


class Embed(nn.Embed):
    """nn.Embed whose lookup takes rows of the float32 table and casts only those rows (to
    `dtype`, else the module's compute dtype). Flax casts the whole table first, so under
    bfloat16 the gradient's scatter-add summed a frequent row's (segment 0, [CLS], [PAD])
    thousands of terms in bfloat16: on BERT-mini, 11% relative error in the token-type gradient
    against float32 compute, 1.9% in the word embeddings'. Here that sum is in float32."""

    def __call__(self, inputs: jax.Array, dtype: jnp.dtype | None = None) -> jax.Array:
        if not jnp.issubdtype(inputs.dtype, jnp.integer):
            raise ValueError(f"embedding ids must be integers, got {inputs.dtype}")
        rows = jnp.take(self.embedding, inputs, axis=0)
        return rows.astype(dtype or self.dtype or self.embedding.dtype)


_XLA_GENERATOR_IMPLS = ("rbg", "unsafe_rbg")


def _drawn_by_xla_generator(rng: jax.Array) -> bool:
    typed = jax.dtypes.issubdtype(rng.dtype, jax.dtypes.prng_key)
    return typed and str(jax.random.key_impl(rng)) in _XLA_GENERATOR_IMPLS


class Dropout(nn.Dropout):
    """nn.Dropout with the same masks, scaling and module names, whose keep mask is kept for the
    backward pass as one byte per element when XLA's generator draws it (`dropout_prng` rbg or
    unsafe_rbg, a TPU's default). Left alone, XLA stores the 4-byte random bits and derives the
    mask again in the backward pass; on v4-8 BERT-small, storing the mask cut the step's HBM
    bytes by 12% (experiments/bench/results/). Threefry's bits are hashed inside the fusions
    that use them, so under it nothing changes."""

    @nn.compact
    def __call__(
        self, inputs: jax.Array, deterministic: bool | None = None, rng: jax.Array | None = None
    ) -> jax.Array:
        deterministic = nn.merge_param("deterministic", self.deterministic, deterministic)
        if deterministic or self.rate == 0.0:
            return inputs
        if self.rate == 1.0:
            return jnp.zeros_like(inputs)
        keep_prob = 1.0 - self.rate
        rng = self.make_rng(self.rng_collection) if rng is None else rng
        shape = [1 if d in self.broadcast_dims else n for d, n in enumerate(inputs.shape)]
        keep = jax.random.bernoulli(rng, p=keep_prob, shape=shape)
        if _drawn_by_xla_generator(rng):
            keep = jax.lax.optimization_barrier(keep)  # not fused into both passes' consumers
        keep = jnp.broadcast_to(keep, inputs.shape)
        return jax.lax.select(keep, inputs / keep_prob, jnp.zeros_like(inputs))


def _promote_all_but_bias(inputs, kernel, bias, *, dtype=None, inexact=True):
    """flax's promotion of a dense layer's operands, leaving its (float32) bias alone."""
    inputs, kernel = nn.dtypes.promote_dtype(inputs, kernel, dtype=dtype, inexact=inexact)
    return inputs, kernel, bias


class _BiasInFloat32:
    """A dense layer that adds its float32 bias to the matmul's output in float32, then casts
    to the compute dtype. Flax adds a bfloat16 copy of the bias, so the bias gradient (a sum
    over every token) was a bfloat16 reduction: on CPU 6-29% relative error against float32
    compute on BERT-mini's encoder biases, where the kernels' gradients were within 0.5%. The
    matmul and its gradients stay in the compute dtype; in float32 nothing changes."""

    def __call__(self, inputs: jax.Array) -> jax.Array:
        out = super().__call__(inputs)
        return out if self.dtype is None else out.astype(self.dtype)


class Dense(_BiasInFloat32, nn.Dense):
    promote_dtype: PromoteDtypeFn = _promote_all_but_bias


class DenseGeneral(_BiasInFloat32, nn.DenseGeneral):
    promote_dtype: PromoteDtypeFn = _promote_all_but_bias


def dense(config: BertConfig, features: int, axes: tuple[str, str], name: str) -> nn.Dense:
    return Dense(
        features,
        dtype=compute_dtype(config),
        param_dtype=jnp.float32,
        kernel_init=weight_init(config, axes),
        bias_init=zeros_init(axes[1:]),
        name=name,
    )


def layer_norm(config: BertConfig, name: str, axis_name: str = "embed") -> nn.LayerNorm:
    # Flax computes LayerNorm statistics in float32 even for a bfloat16 compute dtype.
    return nn.LayerNorm(
        epsilon=config.layer_norm_eps,
        dtype=compute_dtype(config),
        param_dtype=jnp.float32,
        scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), (axis_name,)),
        bias_init=zeros_init((axis_name,)),
        name=name,
    )


_ACTIVATION_RULES: contextvars.ContextVar[tuple | None] = contextvars.ContextVar(
    "activation_rules", default=None
)


@contextlib.contextmanager
def activation_rules(rules: tuple) -> Iterator[None]:
    """Rules for activation constraints while tracing a step. Deliberately not flax's
    `nn.logical_axis_rules`: under that context flax 0.12 also constrains DenseGeneral kernels in
    their flattened init shape during `apply`, which fails."""
    token = _ACTIVATION_RULES.set(tuple(rules))
    try:
        yield
    finally:
        _ACTIVATION_RULES.reset(token)


def current_activation_rules() -> tuple | None:
    """The rules `activation_rules` set while a step is traced (None outside one)."""
    return _ACTIVATION_RULES.get()


def constrain_batch(x_BxLxD: jax.Array) -> jax.Array:
    """Keep activations split over the batch (the `batch` rule, data x fsdp). Without it XLA
    propagates the embedding table's `embed -> fsdp` sharding into the activations and holds the
    whole global batch on every device. A no-op outside a mesh + rules context (e.g. on 1 CPU)."""
    rules = _ACTIVATION_RULES.get()
    if rules is None:
        return x_BxLxD
    names = ("batch",) + (None,) * (x_BxLxD.ndim - 1)
    return nn.with_logical_constraint(x_BxLxD, names, rules=rules)


def gelu(config: BertConfig):
    return functools.partial(jax.nn.gelu, approximate=config.gelu_approximate)
