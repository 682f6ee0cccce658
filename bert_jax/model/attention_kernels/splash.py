"""TPU Splash attention (jax.experimental.pallas.ops.tpu.splash_attention), one kernel per head
count, sequence length and mask shape, vmapped over the batch.

The mask: the static part is a MultiHeadMask of FullMask, CausalMask or LocalMask(window // 2 on
each side; (window // 2, 0) when causal); padding and packing are both segment ids. Each token gets
its packed sequence's id (1..S) or 1 when a row is one sequence, and padding gets 0, an id no real
token has: real queries never see padded keys, and a padded query sees the padded keys (always at
least itself, also under causal or window), so its row is never empty and stays finite. Its value
is unused: no real position reads a padded key in any layer.

What the kernel requires (splash_attention_kernel.py `_splash_attention_forward`,
`_apply_mask_and_soft_cap`, splash_attention_mask_info.py `_process_mask`): block sizes that divide
the sequence length, `block_kv_compute` and (with segment ids) `block_kv` multiples of 128 (the
lane width), so L must be a multiple of 128 (we take blocks of 512, 256 or 128). It applies no
1/sqrt(d) scale, so q is scaled first (in float32, then q's dtype). Head size: the q/k/v blocks
span the whole head dimension, and the kernel tiles its accumulators to 128 lanes and slices back
(`head_dim_v_repeats`), so BERT's 64 is taken as is; libtpu compiles it for v4, v5e and v6e
(tests/test_fused_attention.py). We do not zero-pad to 128: padding would double q/k/v traffic and
VMEM for the same logits (q.k over zero lanes adds nothing) and buys no MXU throughput, since the
64-deep contraction is padded inside the MXU either way. float32 and bfloat16 both run.

Under a mesh (the trainer traces the step with one in context) the kernel runs in shard_map: a
Pallas call cannot be partitioned by XLA, so each device runs it on its own rows and heads, split
as the `batch` and `heads` activation rules say.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu import splash_attention as sa
from jax.sharding import PartitionSpec

from bert_jax.errors import BertJaxError
from bert_jax.model.attention_kernels.platform import require_platform
from bert_jax.model.layers import current_activation_rules

if TYPE_CHECKING:
    from bert_jax.model.attention_mask import AttentionMask

LANES = 128  # splash_attention_kernel.NUM_LANES


def block_size(length: int) -> int:
    for block in (512, 256, LANES):
        if length % block == 0:
            return block
    raise BertJaxError(
        f"attention_implementation 'splash' needs a sequence length that is a multiple of "
        f"{LANES} (the kernel's block and lane width), got {length}"
    )


@functools.lru_cache(maxsize=64)
def make_kernel(
    heads: int, length: int, causal: bool, window: int, interpret: bool
) -> sa.SplashAttentionKernel:
    shape = (length, length)
    if window:
        one = sa.LocalMask(shape, (window // 2, 0 if causal else window // 2), offset=0)
    elif causal:
        one = sa.CausalMask(shape)
    else:
        one = sa.FullMask(shape)
    b = block_size(length)
    blocks = sa.BlockSizes(
        block_q=b, block_kv=b, block_kv_compute=b,
        block_q_dkv=b, block_kv_dkv=b, block_kv_dkv_compute=b, block_q_dq=b, block_kv_dq=b,
    )  # fmt: skip
    return sa.make_splash_mha(
        sa.MultiHeadMask([one] * heads), block_sizes=blocks, head_shards=1, q_seq_shards=1,
        interpret=interpret,
    )  # fmt: skip


def segment_ids(mask: AttentionMask) -> jax.Array:
    """B x L int32: the packed sequence of each real token (1 when unpacked), 0 on padding."""
    valid_BxL = mask.valid_BxL.astype(bool)
    ids_BxL = jnp.ones_like(valid_BxL, jnp.int32) if mask.pack_BxL is None else mask.pack_BxL
    return jnp.where(valid_BxL, ids_BxL.astype(jnp.int32), 0)


def _local_splash(q_BxLxHxK, k_BxLxHxK, v_BxLxHxK, seg_BxL, causal, window, interpret):
    _, length, heads, head_dim = q_BxLxHxK.shape
    kernel = make_kernel(heads, length, causal, window, interpret)
    scale = 1.0 / jnp.sqrt(jnp.float32(head_dim))
    q_BxLxHxK = (q_BxLxHxK.astype(jnp.float32) * scale).astype(q_BxLxHxK.dtype)

    def one_row(q_HxLxK, k_HxLxK, v_HxLxK, seg_L):
        return kernel(q_HxLxK, k_HxLxK, v_HxLxK, segment_ids=sa.SegmentIds(q=seg_L, kv=seg_L))

    heads_first = functools.partial(jnp.swapaxes, axis1=1, axis2=2)  # BxLxHxK <-> BxHxLxK
    out_BxHxLxK = jax.vmap(one_row)(
        heads_first(q_BxLxHxK), heads_first(k_BxLxHxK), heads_first(v_BxLxHxK), seg_BxL
    )
    return heads_first(out_BxHxLxK)


def splash_attention(
    q_BxLxHxK: jax.Array,
    k_BxLxHxK: jax.Array,
    v_BxLxHxK: jax.Array,
    mask: AttentionMask,
    interpret: bool = False,
) -> jax.Array:
    """`interpret=True` runs the kernel in Pallas' interpreter (any backend; tests)."""
    if not interpret:
        require_platform("splash", ("tpu",), "a TPU (a Pallas TPU kernel)")
    block_size(q_BxLxHxK.shape[1])
    local = functools.partial(
        _local_splash, causal=mask.causal, window=mask.window, interpret=interpret
    )
    qkv_seg = (q_BxLxHxK, k_BxLxHxK, v_BxLxHxK, segment_ids(mask))
    mesh, rules = jax.sharding.get_abstract_mesh(), current_activation_rules()
    if mesh.empty or rules is None:
        return local(*qkv_seg)
    spec = nn.logical_to_mesh_axes(("batch", None, "heads", None), rules)
    seg_spec = PartitionSpec(spec[0], None)
    sharded = jax.shard_map(
        local, mesh=mesh, in_specs=(spec, spec, spec, seg_spec), out_specs=spec, check_vma=False
    )
    return sharded(*qkv_seg)
