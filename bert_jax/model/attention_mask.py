"""`AttentionMask`: which keys each query may see (padding, packed sequences, left-to-right
order, a sliding window), in one object every attention kernel reads; `allowed()` is its dense
form, the reference the kernels are tested against. `bert_jax.model.attention_core` re-exports
it; the kernels import it from here (the core imports them)."""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class AttentionMask:
    valid_BxL: jax.Array  # bool: a real token (keys that are padding are never seen)
    # int: the packed sequence a token belongs to (1, 2, ...; 0 on padding). A query sees only
    # keys of its own sequence. None: one sequence per row.
    pack_BxL: jax.Array | None = None
    causal: bool = flax.struct.field(pytree_node=False, default=False)
    window: int = flax.struct.field(pytree_node=False, default=0)  # 0: global attention

    def allowed(self) -> jax.Array:
        """B x 1 x L x L booleans: query i may attend to key j."""
        allowed_Bx1x1xL = self.valid_BxL.astype(bool)[:, None, None, :]
        allowed_Bx1xLxL = jnp.broadcast_to(
            allowed_Bx1x1xL, (*allowed_Bx1x1xL.shape[:2], self.length, self.length)
        )
        if self.pack_BxL is not None:
            same_BxLxL = self.pack_BxL[:, :, None] == self.pack_BxL[:, None, :]
            allowed_Bx1xLxL = allowed_Bx1xLxL & same_BxLxL[:, None]
        query_L1, key_1L = jnp.arange(self.length)[:, None], jnp.arange(self.length)[None, :]
        if self.causal:
            allowed_Bx1xLxL = allowed_Bx1xLxL & (key_1L <= query_L1)
        if self.window:
            allowed_Bx1xLxL = allowed_Bx1xLxL & (jnp.abs(query_L1 - key_1L) <= self.window // 2)
        return allowed_Bx1xLxL

    @property
    def length(self) -> int:
        return self.valid_BxL.shape[-1]

    def with_window(self, window: int) -> AttentionMask:
        return self.replace(window=window)


def padding_mask(valid_BxL: jax.Array, causal: bool = False) -> AttentionMask:
    return AttentionMask(valid_BxL=valid_BxL.astype(bool), causal=causal)
