"""Task heads on the encoder: pretraining (MLM + NSP/SOP, ELECTRA's replaced-token detection),
classification/regression, token tagging, span QA and multiple choice. Logits are returned in
float32. Which family pretrains with which heads: `bert_jax.arch.bert.variants`.

Packed rows (`pack_BxL`, keyword-only): sentence heads (NSP, classification/regression) read every
packed sequence's own first token and return B x S x ... for S = the head's `max_sequences`
(`BertOutput.present` says which slots hold a sequence); token heads return B x L x ... as
always. Without `pack_BxL` every head's inputs and outputs are as before."""

from __future__ import annotations

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


def _classify(cfg: BertConfig, x_BxD: jax.Array, num_labels: int, deterministic: bool) -> jax.Array:
    """Dropout then the `classifier` dense layer, logits in float32 (called inside a compact
    method, so the layers belong to the calling head)."""
    x_BxD = nn.Dropout(cfg.hidden_dropout_prob)(x_BxD, deterministic=deterministic)
    return dense(cfg, num_labels, ("embed", "classes"), "classifier")(x_BxD).astype(jnp.float32)


class BertForSequenceClassification(nn.Module):
    """Dropout + dense on the pooled output; `num_labels=1` is regression (e.g. STS-B). Packed
    rows give B x S x num_labels, one row of logits per sequence slot."""

    config: BertConfig
    num_labels: int
    max_sequences: int = 1  # packed rows: the sequence slots read per row

    @nn.compact
    def __call__(
        self,
        input_ids_BxL,
        input_mask_BxL=None,
        segment_ids_BxL=None,
        *,
        deterministic: bool = True,
        pack_BxL: jax.Array | None = None,
    ) -> jax.Array:
        cfg, slots = self.config, self.max_sequences
        out = BertModel(cfg, name="bert")(
            input_ids_BxL, input_mask_BxL, segment_ids_BxL, deterministic=deterministic,
            pack_BxL=pack_BxL, max_sequences=slots,
        )  # fmt: skip
        x_BxD = _sentence(cfg, out, input_mask_BxL, pack_BxL, slots)
        return _classify(cfg, x_BxD, self.num_labels, deterministic)


class BertForTokenClassification(nn.Module):
    config: BertConfig
    num_labels: int

    @nn.compact
    def __call__(
        self,
        input_ids_BxL,
        input_mask_BxL=None,
        segment_ids_BxL=None,
        *,
        deterministic: bool = True,
        pack_BxL: jax.Array | None = None,
    ) -> jax.Array:
        cfg = self.config
        seq_BxLxD = BertModel(cfg, add_pooling_layer=False, name="bert")(
            input_ids_BxL, input_mask_BxL, segment_ids_BxL, deterministic=deterministic,
            pack_BxL=pack_BxL,
        ).sequence_output  # fmt: skip
        return _classify(cfg, seq_BxLxD, self.num_labels, deterministic)


class BertForQuestionAnswering(nn.Module):
    """Start and end logits over the tokens (the reference's cls/squad layer, HF's qa_outputs)."""

    config: BertConfig

    @nn.compact
    def __call__(
        self,
        input_ids_BxL,
        input_mask_BxL=None,
        segment_ids_BxL=None,
        *,
        deterministic: bool = True,
        pack_BxL: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        seq_BxLxD = BertModel(cfg, add_pooling_layer=False, name="bert")(
            input_ids_BxL, input_mask_BxL, segment_ids_BxL, deterministic=deterministic,
            pack_BxL=pack_BxL,
        ).sequence_output  # fmt: skip
        logits_BxLx2 = dense(cfg, 2, ("embed", "classes"), "qa_outputs")(seq_BxLxD)
        logits_BxLx2 = logits_BxLx2.astype(jnp.float32)
        return logits_BxLx2[..., 0], logits_BxLx2[..., 1]


class BertForMultipleChoice(nn.Module):
    """Inputs B x C x L (one sequence per choice); a score per choice from the pooled output."""

    config: BertConfig

    @nn.compact
    def __call__(
        self,
        input_ids_BxCxL,
        input_mask_BxCxL=None,
        segment_ids_BxCxL=None,
        *,
        deterministic: bool = True,
    ) -> jax.Array:
        cfg = self.config
        b, c, seq_len = input_ids_BxCxL.shape

        def flat(x):
            return None if x is None else x.reshape(b * c, seq_len)

        out = BertModel(cfg, name="bert")(
            flat(input_ids_BxCxL),
            flat(input_mask_BxCxL),
            flat(segment_ids_BxCxL),
            deterministic=deterministic,
        )
        pooled_NxD = _sentence(cfg, out, flat(input_mask_BxCxL))
        return _classify(cfg, pooled_NxD, 1, deterministic).reshape(b, c)
