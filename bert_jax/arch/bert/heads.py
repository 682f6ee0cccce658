"""Task heads on the encoder: pretraining (MLM + NSP/SOP, ELECTRA's replaced-token detection),
classification/regression, token tagging, span QA and multiple choice. Logits are returned in
float32. Which family pretrains with which heads: `bert_jax.arch.bert.variants`.

Packed rows (`pack_BxL`, keyword-only): sentence heads (NSP, classification/regression) read every
packed sequence's own first token and return B x S x ... for S = the head's `max_sequences`
(`BertOutput.present` says which slots hold a sequence); token heads return B x L x ... as
always. Without `pack_BxL` every head's inputs and outputs are as before."""

from __future__ import annotations

from typing import ClassVar

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from bert_jax.arch.bert.model import BertModel, BertOutput, packed_sentence_vectors, sentence_vector
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.model.layers import dense, embed_axis, gelu, layer_norm, zeros_init


@flax.struct.dataclass
class PretrainingOutput:
    mlm_logits: jax.Array  # B x P x V at masked_lm_positions (B x L x V without positions)
    nsp_logits: jax.Array | None  # B x 2 (B x S x 2 packed); index 1 = "B is a random next"
    encoder: BertOutput


class MaskedLMHead(nn.Module):
    """dense + GELU + LayerNorm, then the decoder tied to the word embeddings plus a bias. With
    factorised embeddings the dense layer maps the hidden size down to their width E."""

    config: BertConfig

    @nn.compact
    def __call__(self, x_BxPxD: jax.Array, bert: BertModel) -> jax.Array:
        cfg = self.config
        out_axis = "embed_out" if cfg.embedding_size is None else embed_axis(cfg)
        h_BxPxE = dense(cfg, cfg.embed_dim, ("embed", out_axis), "transform")(x_BxPxD)
        h_BxPxE = layer_norm(cfg, "transform_layer_norm", embed_axis(cfg))(gelu(cfg)(h_BxPxE))
        bias_V = self.param("output_bias", zeros_init(("vocab",)), (cfg.vocab_size,), jnp.float32)
        return bert.attend(h_BxPxE).astype(jnp.float32) + bias_V


class BertForPreTraining(nn.Module):
    """`use_nsp=False` is the BertForMaskedLM layout (no pooler, no NSP head)."""

    config: BertConfig
    use_nsp: bool = True
    max_sequences: int = 1  # packed rows: the sequence slots the NSP head reads per row

    def setup(self) -> None:
        if self.use_nsp and not self.config.pooler:
            raise BertJaxError("the sentence-pair head (NSP/SOP) reads the pooler; config.pooler "
                               f"is False (family {self.config.family})")  # fmt: skip
        self.bert = BertModel(self.config, add_pooling_layer=self.use_nsp)
        self.predictions = MaskedLMHead(self.config)
        if self.use_nsp:
            self.seq_relationship = dense(self.config, 2, ("embed", "classes"), "seq_relationship")

    def __call__(
        self,
        input_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array | None = None,
        segment_ids_BxL: jax.Array | None = None,
        masked_lm_positions_BxP: jax.Array | None = None,
        *,
        deterministic: bool = True,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        pack_BxL: jax.Array | None = None,
    ) -> PretrainingOutput:
        out = self.bert(
            input_ids_BxL,
            input_mask_BxL,
            segment_ids_BxL,
            deterministic=deterministic,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            pack_BxL=pack_BxL,
            max_sequences=self.max_sequences,
        )
        x_BxPxD = out.sequence_output
        if masked_lm_positions_BxP is not None:  # gather before the (large) vocab projection
            x_BxPxD = jnp.take_along_axis(x_BxPxD, masked_lm_positions_BxP[..., None], axis=1)
        mlm_BxPxV = self.predictions(x_BxPxD, self.bert)
        nsp_Bx2 = None
        if self.use_nsp:
            nsp_Bx2 = self.seq_relationship(out.pooled_output).astype(jnp.float32)
        return PretrainingOutput(mlm_logits=mlm_BxPxV, nsp_logits=nsp_Bx2, encoder=out)


class BertForReplacedTokenDetection(nn.Module):
    """ELECTRA's discriminator: per token, the logit that it was replaced (dense + activation +
    dense to 1), over the encoder without a pooler."""

    config: BertConfig

    @nn.compact
    def __call__(
        self,
        input_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array | None = None,
        segment_ids_BxL: jax.Array | None = None,
        *,
        deterministic: bool = True,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        pack_BxL: jax.Array | None = None,
    ) -> tuple[jax.Array, BertOutput]:
        cfg = self.config
        out = BertModel(cfg, add_pooling_layer=False, name="bert")(
            input_ids_BxL,
            input_mask_BxL,
            segment_ids_BxL,
            deterministic=deterministic,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            pack_BxL=pack_BxL,
        )
        return DiscriminatorHead(cfg, name="discriminator")(out.sequence_output), out


class DiscriminatorHead(nn.Module):
    """dense + activation + dense to one logit per token (float32)."""

    config: BertConfig

    @nn.compact
    def __call__(self, x_BxLxD: jax.Array) -> jax.Array:
        cfg = self.config
        h_BxLxD = dense(cfg, cfg.hidden_size, ("embed", "embed_out"), "transform")(x_BxLxD)
        logits_BxLx1 = dense(cfg, 1, ("embed_out", "classes"), "prediction")(gelu(cfg)(h_BxLxD))
        return logits_BxLx1[..., 0].astype(jnp.float32)


def _sentence(
    cfg: BertConfig,
    out: BertOutput,
    input_mask_BxL: jax.Array | None,
    pack_BxL: jax.Array | None = None,
    max_sequences: int = 1,
) -> jax.Array:
    """The pooled output, or for a family without a pooler the hidden state it would read
    (B x D; B x S x D for packed rows)."""
    if out.pooled_output is not None:
        return out.pooled_output
    if pack_BxL is not None:
        return packed_sentence_vectors(cfg, out.sequence_output, pack_BxL, max_sequences)[0]
    if input_mask_BxL is None:
        input_mask_BxL = jnp.ones(out.sequence_output.shape[:2], jnp.int32)
    return sentence_vector(cfg, out.sequence_output, input_mask_BxL)


class _EncoderHead(nn.Module):
    """`bert`, then the head's own layers in the same compact scope, so parameter paths stay
    `bert/...`, `classifier/...` (the Hugging Face layout). Subclasses state only what differs."""

    config: BertConfig
    num_labels: ClassVar[int]  # the classifier's width: a field of the heads that have one
    # Class constants, not fields, so each head keeps its own constructor. A sentence head reads
    # the pooled output (transformers gives only those a pooler), a token head every token.
    sentence_head = False
    max_sequences = 1  # packed rows: the sequence slots a sentence head reads per row

    @nn.compact
    def __call__(
        self,
        input_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array | None = None,
        segment_ids_BxL: jax.Array | None = None,
        *,
        deterministic: bool = True,
        pack_BxL: jax.Array | None = None,
    ) -> jax.Array | tuple[jax.Array, jax.Array]:
        cfg, slots = self.config, self.max_sequences
        out = BertModel(cfg, add_pooling_layer=self.sentence_head, name="bert")(
            input_ids_BxL, input_mask_BxL, segment_ids_BxL, deterministic=deterministic,
            pack_BxL=pack_BxL, max_sequences=slots,
        )  # fmt: skip
        if self.sentence_head:
            return self.head(_sentence(cfg, out, input_mask_BxL, pack_BxL, slots), deterministic)
        return self.head(out.sequence_output, deterministic)

    @nn.nowrap  # a plain call in `__call__`'s scope, not a Flax method of its own
    def head(self, x_BxD: jax.Array, deterministic: bool) -> jax.Array:
        """Dropout then the `classifier` dense layer, logits in float32 (x: B x D, B x S x D or
        B x L x D)."""
        x_BxD = nn.Dropout(self.config.hidden_dropout_prob)(x_BxD, deterministic=deterministic)
        classifier = dense(self.config, self.num_labels, ("embed", "classes"), "classifier")
        return classifier(x_BxD).astype(jnp.float32)


class BertForSequenceClassification(_EncoderHead):
    """Dropout + dense on the pooled output; `num_labels=1` is regression (e.g. STS-B). Packed
    rows give B x S x num_labels, one row of logits per sequence slot."""

    num_labels: int
    max_sequences: int = 1  # packed rows: the sequence slots read per row
    sentence_head = True


class BertForTokenClassification(_EncoderHead):
    num_labels: int


class BertForQuestionAnswering(_EncoderHead):
    """Start and end logits over the tokens (the reference's cls/squad layer, HF's qa_outputs)."""

    @nn.nowrap
    def head(self, x_BxLxD: jax.Array, deterministic: bool) -> tuple[jax.Array, jax.Array]:
        logits_BxLx2 = dense(self.config, 2, ("embed", "classes"), "qa_outputs")(x_BxLxD)
        logits_BxLx2 = logits_BxLx2.astype(jnp.float32)
        return logits_BxLx2[..., 0], logits_BxLx2[..., 1]


class BertForMultipleChoice(_EncoderHead):
    """Inputs B x C x L (one sequence per choice); a score per choice from the pooled output."""

    num_labels = 1
    sentence_head = True

    # Not compact: it only reshapes around the shared compact `__call__` (which owns the scope).
    def __call__(
        self,
        input_ids_BxCxL: jax.Array,
        input_mask_BxCxL: jax.Array | None = None,
        segment_ids_BxCxL: jax.Array | None = None,
        *,
        deterministic: bool = True,
    ) -> jax.Array:
        b, c, seq_len = input_ids_BxCxL.shape

        def flat(x_BxCxL: jax.Array | None) -> jax.Array | None:  # each choice a row of its own
            return None if x_BxCxL is None else x_BxCxL.reshape(b * c, seq_len)

        scores_Nx1 = super().__call__(
            flat(input_ids_BxCxL), flat(input_mask_BxCxL), flat(segment_ids_BxCxL),
            deterministic=deterministic,
        )  # fmt: skip
        return scores_Nx1.reshape(b, c)
