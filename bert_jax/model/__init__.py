"""Blocks every encoder shares: attention (and its kernels), the layer stack, embeddings,
packing and the looped <-> scanned layout. An architecture's own model lives in
`bert_jax/arch/<name>/`."""

from bert_jax.model.scan import stack_layers, unstack_layers

__all__ = ["stack_layers", "unstack_layers"]
