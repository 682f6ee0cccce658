"""cuDNN flash attention through `jax.nn.dot_product_attention(implementation="cudnn")`.

What jax 0.10's path takes (jax/_src/nn/functions.py `dot_product_attention`, then
jax/_src/cudnn/fused_attention_stablehlo.py `dot_product_attention`):
- padding as per-row lengths (`key_value_seq_lengths`): the first n keys are real, so rows must be
  right-padded, which every family that calls `attend` is (families.base `padding_side`);
- `is_causal`, and `local_window_size=(left, right)` only with right == 0 or causal (cuDNN's
  window is left-sided, `sliding_window_length`);
- a dense boolean `mask`, turned into an additive bias of q's dtype (`combine_bias_and_mask`);
  cuDNN's own packed layout (`q_offsets`/`kv_offsets`, Hopper only) is not exposed by jax.nn.

So: padding (+ causal, + a causal window) is lengths and flags, nothing L x L is built; packed
sequences or ModernBERT's two-sided window become the B x 1 x L x L mask (`allowed()`), still one
fused kernel but reading an L x L bias per row.

cuDNN requires (`check_layout`, `check_is_flash_attention`): q/k/v float16 or bfloat16 (we refuse
float32 here with the fix); head dim a multiple of 8 and <= 128 (<= 256 on Hopper): BERT's 64 is
native, no padding; with a bias in training, even sequence lengths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from bert_jax.errors import BertJaxError
from bert_jax.model.attention_kernels.platform import require_platform

if TYPE_CHECKING:
    from bert_jax.model.attention_mask import AttentionMask

DTYPES = (jnp.bfloat16, jnp.float16)


def cudnn_arguments(mask: AttentionMask) -> dict[str, Any]:
    """The keyword arguments of jax.nn.dot_product_attention that express `mask` for cuDNN."""
    one_sided_window = mask.window == 0 or mask.causal
    if mask.pack_BxL is None and one_sided_window:
        lengths_B = mask.valid_BxL.astype(jnp.int32).sum(axis=-1)
        window = (mask.window // 2, 0) if mask.window else None
        return {"key_value_seq_lengths": lengths_B, "is_causal": mask.causal,
                "local_window_size": window}  # fmt: skip
    return {"mask": mask.allowed()}


def cudnn_attention(
    q_BxLxHxK: jax.Array, k_BxLxHxK: jax.Array, v_BxLxHxK: jax.Array, mask: AttentionMask
) -> jax.Array:
    require_platform("cudnn", ("gpu",), "an NVIDIA GPU with cuDNN")
    if q_BxLxHxK.dtype not in DTYPES:
        raise BertJaxError(
            f"attention_implementation 'cudnn' needs bfloat16 or float16 activations, got "
            f"{q_BxLxHxK.dtype}: set dtype 'bfloat16'"
        )
    head_dim = q_BxLxHxK.shape[-1]
    if head_dim % 8 or head_dim > 256:
        raise BertJaxError(
            f"attention_implementation 'cudnn' needs a head size that is a multiple of 8 and at "
            f"most 256 (128 before Hopper), got {head_dim}"
        )
    return jax.nn.dot_product_attention(
        q_BxLxHxK, k_BxLxHxK, v_BxLxHxK, implementation="cudnn", **cudnn_arguments(mask)
    )
