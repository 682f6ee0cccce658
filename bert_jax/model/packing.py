"""Where packed sequences sit in a row: `pack_BxL` numbers them 1, 2, ... (0 on padding), as
`attention_core.AttentionMask` reads it. Positions restart at 0 in every sequence, and a sentence
head reads each sequence's first token."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def sequence_starts(pack_BxL: jax.Array) -> jax.Array:
    """bool B x L: the token opens a packed sequence (its id differs from the token before)."""
    previous_BxL = jnp.pad(pack_BxL[:, :-1], ((0, 0), (1, 0)), constant_values=-1)
    return (pack_BxL != previous_BxL) & (pack_BxL > 0)


def pack_positions(pack_BxL: jax.Array) -> jax.Array:
    """int32 B x L: each token's position inside its own packed sequence (0 on padding)."""
    slot_1xL = jnp.arange(pack_BxL.shape[-1], dtype=jnp.int32)[None, :]
    start_BxL = jnp.where(sequence_starts(pack_BxL), slot_1xL, 0)
    opened_at_BxL = jax.lax.cummax(start_BxL, axis=1)
    return jnp.where(pack_BxL > 0, slot_1xL - opened_at_BxL, 0)


def first_tokens(pack_BxL: jax.Array, max_sequences: int) -> tuple[jax.Array, jax.Array]:
    """(slots B x S int32, present B x S bool): where sequences 1..S of each row open. A row with
    fewer than S sequences reports slot 0 and present False for the missing ones."""
    ids_1xS = jnp.arange(1, max_sequences + 1, dtype=pack_BxL.dtype)[None, :]
    opens_BxSxL = sequence_starts(pack_BxL)[:, None, :] & (
        pack_BxL[:, None, :] == ids_1xS[:, :, None]
    )
    present_BxS = opens_BxSxL.any(axis=-1)
    return jnp.argmax(opens_BxSxL, axis=-1).astype(jnp.int32), present_BxS
