"""Which keys each query may see, and the attention computation every encoder shares.

`AttentionMask` says it once for all kernels: the real tokens of each row (`valid_BxL`), which
packed sequence each token belongs to (`pack_BxL`, None when a row holds one sequence),
left-to-right order (`causal`) and a sliding window (`window`, ModernBERT's `local_attention`: a
query sees keys at most `window // 2` positions away). `allowed()` is the dense boolean form,
the reference the kernels are tested against.

`attend` computes softmax(q k^T / sqrt(d)) v with that mask by the named implementation, chosen
by name, never silently:
- "xla" (default, every backend, the reference): jax.nn.dot_product_attention with `allowed()`.
- "cudnn" (NVIDIA GPU; attention_kernels/cudnn.py): bfloat16/float16 only, head size a multiple
  of 8 up to 128 (256 on Hopper). Padding, causal and a causal window become lengths and flags;
  packing or a two-sided window becomes the dense mask (cuDNN adds it as a bias).
- "splash" (TPU; attention_kernels/splash.py): L a multiple of 128; padding and packing become
  segment ids (padding 0), causal/window a static block-sparse mask; q pre-scaled by 1/sqrt(d).
- "auto": splash on TPU when L is a multiple of 128, cudnn on an NVIDIA GPU for bfloat16/float16
  with an even L and a head size cuDNN takes, xla otherwise (the CPU: tests keep the reference).
  On a v4-8, ModernBERT-base's packed 1024-token step moved 40% fewer bytes with splash than
  with xla, which builds every layer's L x L scores in HBM (experiments/bench/roofline_table.py).
Head size 64 (BERT's) is native to both kernels: nothing is padded (the Splash docstring says why).
Asking for a kernel on the wrong backend is a one-line BertJaxError, not an XLA trace.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bert_jax.config import ATTENTION_IMPLEMENTATIONS
from bert_jax.errors import BertJaxError
from bert_jax.model.attention_kernels.cudnn import cudnn_attention
from bert_jax.model.attention_kernels.platform import target_platform
from bert_jax.model.attention_mask import AttentionMask, padding_mask

IMPLEMENTATIONS = ATTENTION_IMPLEMENTATIONS


def check_implementation(name: str, variable: str = "attention_implementation") -> None:
    if name not in IMPLEMENTATIONS:
        raise BertJaxError(f"{variable} {name!r}: use one of {IMPLEMENTATIONS}")


def attention_scores(q_BxLxHxK: jax.Array, k_BxLxHxK: jax.Array, mask: AttentionMask) -> jax.Array:
    """Masked scaled scores, B x H x L x L in float32 (masked entries at the float32 minimum)."""
    head_dim = q_BxLxHxK.shape[-1]
    scores_BxHxLxL = jnp.einsum(
        "bqhk,bthk->bhqt", q_BxLxHxK, k_BxLxHxK, preferred_element_type=jnp.float32
    ) / jnp.sqrt(jnp.float32(head_dim))
    return jnp.where(mask.allowed(), scores_BxHxLxL, jnp.finfo(jnp.float32).min)


def automatic(q_BxLxHxK: jax.Array) -> str:
    """The kernel "auto" runs for these queries on the platform the step is traced for."""
    platform, length, head_dim = target_platform(), q_BxLxHxK.shape[1], q_BxLxHxK.shape[-1]
    if platform == "tpu" and length % 128 == 0:
        return "splash"
    cudnn_shape = length % 2 == 0 and head_dim % 8 == 0 and head_dim <= 128
    if platform == "gpu" and q_BxLxHxK.dtype in (jnp.bfloat16, jnp.float16) and cudnn_shape:
        return "cudnn"
    return "xla"


def attend(
    q_BxLxHxK: jax.Array,
    k_BxLxHxK: jax.Array,
    v_BxLxHxK: jax.Array,
    mask: AttentionMask,
    implementation: str = "xla",
) -> jax.Array:
    """The attention output B x L x H x K without materialising probabilities for the caller."""
    check_implementation(implementation)
    if implementation == "auto":
        implementation = automatic(q_BxLxHxK)
    if implementation == "cudnn":
        return cudnn_attention(q_BxLxHxK, k_BxLxHxK, v_BxLxHxK, mask)
    if implementation == "splash":
        # Imported here: Pallas' TPU modules cost every other run ~50 ms of import.
        from bert_jax.model.attention_kernels.splash import splash_attention

        return splash_attention(q_BxLxHxK, k_BxLxHxK, v_BxLxHxK, mask)
    return jax.nn.dot_product_attention(
        q_BxLxHxK, k_BxLxHxK, v_BxLxHxK, mask=mask.allowed(), implementation="xla"
    )


__all__ = [
    "IMPLEMENTATIONS", "AttentionMask", "attend", "attention_scores", "check_implementation",
    "padding_mask",
]  # fmt: skip
