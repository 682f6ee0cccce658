"""ModernBERT's heads, as transformers' ModernBertFor*: the masked LM (head = dense + activation +
LayerNorm, then the decoder tied to the token embeddings, with a bias) and the task heads (the
same `head`, dropout, then `classifier`). Sentence heads pool [CLS] or the mean of the real
tokens (`classifier_pooling`).

Every head takes input ids, input mask and segment ids as BERT's do, so the fine-tuning tasks
call them alike; segment ids are ignored (ModernBERT has no token types). With
packed rows (`pack_BxL`), a sentence head returns one row of logits per packed sequence,
B x S x C for S = `max_sequences`, and reads each sequence's own first token or mean.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.arch.modernbert.config import ModernBertConfig
from bert_jax.arch.modernbert.model import ModernBertModel, activation, dense, norm
from bert_jax.model.packing import first_tokens

ENCODER_SCOPE = "model"  # the encoder's parameters in every head, as transformers names it


class Head(nn.Module):
    """transformers' ModernBertPredictionHead: dense (classifier_bias) + activation + norm."""

    config: ModernBertConfig

    @nn.compact
    def __call__(self, x_BxD: jax.Array) -> jax.Array:
        cfg = self.config
        h = dense(cfg, cfg.hidden_size, ("embed", "embed_out"), cfg.classifier_bias, "dense")(x_BxD)
        return norm(cfg, "norm")(activation(cfg.classifier_activation)(h))


def pool(
    cfg: ModernBertConfig,
    seq_BxLxD: jax.Array,
    mask_BxL: jax.Array,
    pack_BxL: jax.Array | None = None,
    max_sequences: int = 1,
    first_real: bool = False,
) -> jax.Array:
    """The sentence vector: B x D, or B x S x D for packed rows. `cls` pooling reads position 0
    (sequence classification) or, with `first_real`, the first real token (multiple choice)."""
    if pack_BxL is None:
        if cfg.classifier_pooling == "cls" and first_real:
            # transformers' multiple choice reads the first real token (left padding too).
            return jnp.take_along_axis(seq_BxLxD, mask_BxL.argmax(-1)[:, None, None], axis=1)[:, 0]
        if cfg.classifier_pooling == "cls":
            return seq_BxLxD[:, 0]
        w_BxL = mask_BxL.astype(seq_BxLxD.dtype)
        # An all-padding row (a batch filled up to size) pools to zeros, not NaN.
        count_Bx1 = jnp.maximum(w_BxL.sum(-1, keepdims=True), 1.0)
        return jnp.einsum("bl,bld->bd", w_BxL, seq_BxLxD) / count_Bx1
    if cfg.classifier_pooling == "cls":
        slots_BxS, _ = first_tokens(pack_BxL, max_sequences)
        return jnp.take_along_axis(seq_BxLxD, slots_BxS[..., None], axis=1)
    ids_S = jnp.arange(1, max_sequences + 1, dtype=pack_BxL.dtype)
    w_BxSxL = (pack_BxL[:, None, :] == ids_S[None, :, None]).astype(seq_BxLxD.dtype)
    sums_BxSxD = jnp.einsum("bsl,bld->bsd", w_BxSxL, seq_BxLxD)
    return sums_BxSxD / jnp.maximum(w_BxSxL.sum(-1, keepdims=True), 1.0)


class ModernBertForMaskedLM(nn.Module):
    config: ModernBertConfig

    @nn.compact
    def __call__(
        self,
        input_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array | None = None,
        segment_ids_BxL: jax.Array | None = None,
        masked_lm_positions_BxP: jax.Array | None = None,
        pack_BxL: jax.Array | None = None,
        *,
        deterministic: bool = True,
    ) -> jax.Array:
        """Logits B x P x V at the masked positions (B x L x V without them)."""
        cfg = self.config
        model = ModernBertModel(cfg, name=ENCODER_SCOPE)
        x_BxPxD = model(
            input_ids_BxL, input_mask_BxL, pack_BxL, deterministic=deterministic
        ).sequence_output
        if masked_lm_positions_BxP is not None:  # gather before the (large) vocab projection
            x_BxPxD = jnp.take_along_axis(x_BxPxD, masked_lm_positions_BxP[..., None], axis=1)
        h_BxPxD = Head(cfg, name="head")(x_BxPxD)
        table_VxD = nn.meta.unbox(model.variables["params"]["embeddings"]["tok_embeddings"])
        logits = jnp.einsum(
            "bpd,vd->bpv", h_BxPxD, table_VxD["embedding"].astype(h_BxPxD.dtype),
            preferred_element_type=jnp.float32,
        )  # fmt: skip
        if cfg.decoder_bias:
            bias_V = self.param(
                "decoder_bias",
                nn.with_logical_partitioning(nn.initializers.zeros_init(), ("vocab",)),
                (cfg.vocab_size,),
                jnp.float32,
            )
            logits = logits + bias_V
        return logits


class _TaskHead(nn.Module):
    """Encoder -> (pooling) -> head -> dropout -> classifier. `kind`: "sentence" (B x C, or
    B x S x C packed), "token" (B x L x C), "span" ((start, end), each B x L) or "choice" (inputs
    B x N x L, one logit per choice: B x N)."""

    config: ModernBertConfig
    outputs: int = 2
    kind: str = "sentence"
    max_sequences: int = 1  # packed rows: sequences per row a sentence head reads

    @nn.compact
    def __call__(
        self,
        input_ids_BxL: jax.Array | None = None,
        input_mask_BxL: jax.Array | None = None,
        segment_ids_BxL: jax.Array | None = None,
        pack_BxL: jax.Array | None = None,
        *,
        input_ids_BxCxL: jax.Array | None = None,  # multiple choice, as the tasks name them
        input_mask_BxCxL: jax.Array | None = None,
        segment_ids_BxCxL: jax.Array | None = None,
        deterministic: bool = True,
    ):
        cfg = self.config
        choices = input_ids_BxCxL is not None
        input_ids = input_ids_BxCxL if choices else input_ids_BxL
        input_mask = input_mask_BxCxL if choices else input_mask_BxL
        shape = input_ids.shape
        if input_mask is None:
            input_mask = jnp.ones_like(input_ids)
        ids_BxL, mask_BxL = input_ids.reshape(-1, shape[-1]), input_mask.reshape(-1, shape[-1])
        seq_BxLxD = ModernBertModel(cfg, name=ENCODER_SCOPE)(
            ids_BxL, mask_BxL, pack_BxL, deterministic=deterministic
        ).sequence_output
        x = seq_BxLxD
        if self.kind in ("sentence", "choice"):
            x = pool(cfg, seq_BxLxD, mask_BxL, pack_BxL, self.max_sequences,
                     first_real=self.kind == "choice")  # fmt: skip
        x = nn.Dropout(cfg.classifier_dropout)(Head(cfg, name="head")(x), deterministic)
        classifier = nn.Dense(
            self.outputs,
            dtype=jnp.dtype(cfg.dtype),
            param_dtype=jnp.float32,
            kernel_init=nn.with_logical_partitioning(
                jax.nn.initializers.truncated_normal(cfg.initializer_range), ("embed", "classes")
            ),
            bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), ("classes",)),
            name="classifier",
        )
        logits = classifier(x).astype(jnp.float32)
        if self.kind == "span":
            return logits[..., 0], logits[..., 1]
        if self.kind == "choice":
            return logits.reshape(shape[:-1])
        return logits


def ModernBertForSequenceClassification(config: ModernBertConfig, num_labels: int = 2, **kw):
    return _TaskHead(config, num_labels, "sentence", **kw)


def ModernBertForTokenClassification(config: ModernBertConfig, num_labels: int = 2):
    return _TaskHead(config, num_labels, "token")


def ModernBertForQuestionAnswering(config: ModernBertConfig):
    return _TaskHead(config, 2, "span")


def ModernBertForMultipleChoice(config: ModernBertConfig):
    return _TaskHead(config, 1, "choice")
