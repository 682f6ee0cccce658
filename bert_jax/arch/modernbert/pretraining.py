"""What the pretraining task needs to run ModernBERT in the shared loop: its config from a size
preset (`config.model`, with the pretraining config's `intermediate_size`), the masked-LM model
with the task's output layout, and its FLOPs for MFU."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax

from bert_jax.arch.bert.heads import PretrainingOutput
from bert_jax.arch.modernbert.config import ModernBertConfig
from bert_jax.arch.modernbert.heads import ModernBertForMaskedLM


def config_from_bert(bert: Any) -> ModernBertConfig:
    """The ModernBERT of a BERT size preset: same width, depth, heads, vocab and dropout; the
    GeGLU's inner width is the preset's intermediate_size (the ModernBERT recipes set it), its
    GELU the config's hidden_act. The special-token ids are the vocabulary's, set when the run
    is exported."""
    return ModernBertConfig(
        vocab_size=bert.vocab_size,
        hidden_size=bert.hidden_size,
        num_hidden_layers=bert.num_hidden_layers,
        num_attention_heads=bert.num_attention_heads,
        intermediate_size=bert.intermediate_size,
        hidden_activation=bert.hidden_act,
        initializer_range=bert.initializer_range,
        embedding_dropout=bert.hidden_dropout_prob,
        mlp_dropout=bert.hidden_dropout_prob,
        attention_dropout=bert.attention_probs_dropout_prob,
        dtype=bert.dtype,
        scan_layers=bert.scan_layers,
        remat_policy=bert.remat_policy,
        attention_implementation=bert.attention_implementation,
    )


class ModernBertPretraining(nn.Module):
    """ModernBertForMaskedLM with the pretraining task's inputs and output (no sentence head;
    segment ids are read and ignored: ModernBERT has no token types)."""

    config: ModernBertConfig

    @nn.compact
    def __call__(
        self,
        input_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array | None = None,
        segment_ids_BxL: jax.Array | None = None,
        masked_lm_positions_BxP: jax.Array | None = None,
        *,
        deterministic: bool = True,
        pack_BxL: jax.Array | None = None,
    ) -> PretrainingOutput:
        """`pack_BxL`: packed rows' sequence ids (packed shards), None for one per row."""
        del segment_ids_BxL
        logits_BxPxV = ModernBertForMaskedLM(self.config, name="mlm")(
            input_ids_BxL,
            input_mask_BxL,
            masked_lm_positions_BxP=masked_lm_positions_BxP,
            pack_BxL=pack_BxL,
            deterministic=deterministic,
        )
        return PretrainingOutput(mlm_logits=logits_BxPxV, nsp_logits=None, encoder=None)


def flops_per_token(cfg: ModernBertConfig, seq_len: int) -> float:
    """Encoder matmul FLOPs x 3 (forward + backward) per token: q/k/v/out 4 d^2, GeGLU 3 d f, and
    attention 4 d x the keys a query sees (the whole row in global layers, the window in local
    ones)."""
    d, f = cfg.hidden_size, cfg.intermediate_size
    total = 0.0
    for i in range(cfg.num_hidden_layers):
        keys = seq_len if cfg.is_global(i) else min(seq_len, cfg.local_attention + 1)
        total += 2.0 * (4 * d * d + 3 * d * f) + 4.0 * d * keys
    return 3.0 * total


def flops_per_step(cfg: ModernBertConfig, batch: int, seq_len: int, predictions: int) -> float:
    """The encoder over every token plus the head (dense d^2, decoder d V) at the predictions."""
    d, v = cfg.hidden_size, cfg.vocab_size
    head = 3.0 * 2.0 * (d * d + d * v)
    return batch * (seq_len * flops_per_token(cfg, seq_len) + predictions * head)


def saved_elements(cfg: ModernBertConfig, batch: int, seq_len: int, predictions: int) -> float:
    """Activation elements an ideally fused step keeps for its backward pass: per token and layer
    the layer's input, both norms' outputs, q, k, v, the attention context, the residual sum
    (d x 8) and the GeGLU's projection (2 f; its product is recomputed); the embeddings' and the
    final norm's inputs (2 d); per prediction the head's input, pre-activation and norm input
    (3 d; the logits never leave a fused cross-entropy)."""
    d, f = cfg.hidden_size, cfg.intermediate_size
    per_token = cfg.num_hidden_layers * (8 * d + 2 * f) + 2 * d
    return float(batch * (seq_len * per_token + predictions * 3 * d))
