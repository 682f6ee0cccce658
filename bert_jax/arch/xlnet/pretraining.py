"""What the pretraining task needs to run XLNet's permutation LM in the shared loop: the model
for a size preset, its inputs from a batch (`target_mapping` from the target positions) and its
FLOPs for MFU."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from bert_jax.arch.xlnet.config import XLNetConfig
from bert_jax.arch.xlnet.model import XLNetLM
from bert_jax.config import GELU_ACTIVATIONS
from bert_jax.errors import BertJaxError


def config_from_bert(bert: Any) -> XLNetConfig:
    """The XLNet of a BERT size preset (same width, depth, heads, FFN, vocab and dropout)."""
    if GELU_ACTIVATIONS[bert.hidden_act]:  # a tanh form
        raise BertJaxError(
            f"hidden_act {bert.hidden_act!r}: XLNet's feed-forward uses the exact gelu here; "
            "leave config.hidden_act unset"
        )
    return XLNetConfig(
        vocab_size=bert.vocab_size,
        d_model=bert.hidden_size,
        n_layer=bert.num_hidden_layers,
        n_head=bert.num_attention_heads,
        d_inner=bert.intermediate_size,
        dropout=bert.hidden_dropout_prob,
        initializer_range=bert.initializer_range,
        dtype=bert.dtype,
        remat=getattr(bert, "remat_policy", "none") not in ("none", None),
    )


def model_for(bert: Any) -> XLNetLM:
    return XLNetLM(config_from_bert(bert))


def model_inputs(batch: Any) -> dict[str, jax.Array]:
    length = batch["input_ids"].shape[1]
    tm_BxPxL = jax.nn.one_hot(batch["masked_lm_positions"], length, dtype=jnp.float32)
    tm_BxPxL = tm_BxPxL * batch["masked_lm_weights"][..., None].astype(jnp.float32)
    return {
        "input_ids_BxL": batch["input_ids"],
        "segment_ids_BxL": batch["segment_ids"],
        "input_mask_BxL": batch["input_mask"],
        "perm_mask_BxLxL": batch["perm_mask"],
        "target_mapping_BxPxL": tm_BxPxL,
    }


def flops_per_step(cfg: XLNetConfig, batch: int, length: int, predict: int) -> float:
    """Matmul FLOPs x 3 (fwd + bwd): both streams' projections, attention against the content
    keys (the query stream runs its attention at all L positions, as the model computes it), the
    relative-position projection and the LM head over the P predictions."""
    d, f, n = cfg.d_model, cfg.d_inner, cfg.n_layer
    content, positions = _content_and_positions(cfg, length)
    query = (
        predict * (2 * d * d + 2 * d * f) + 2 * length * length * d * 2 + length * 2 * length * d
    )
    per_example = 2 * n * (content + positions + query) + 2 * predict * d * cfg.vocab_size
    return 3.0 * batch * per_example


def _content_and_positions(cfg: XLNetConfig, length: int) -> tuple[float, float]:
    """Forward matmul FLOPs / 2 of one layer's content stream over one example: its projections,
    feed-forward and attention; and the relative-position projection with its scores."""
    d, f = cfg.d_model, cfg.d_inner
    content = length * (4 * d * d + 2 * d * f) + 2 * length * length * d * 2  # qkvo, ffn, attn
    positions = 2 * length * d * d + 2 * length * (2 * length) * d  # r projection, bd scores
    return content, positions


def content_flops_per_token(cfg: XLNetConfig, length: int) -> float:
    """Training FLOPs (fwd + bwd) per token of the content stream alone, as fine-tuning runs it."""
    content, positions = _content_and_positions(cfg, length)
    return 3.0 * 2 * cfg.n_layer * (content + positions) / length
