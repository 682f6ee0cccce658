"""ELECTRA pretraining (Clark et al. 2020) as one Flax module over the one encoder: a small
masked-LM generator and the discriminator, sharing the word, position and token-type embeddings
(and their LayerNorm, as ELECTRA's code does), run in one forward pass so the trainer's single
jitted step trains both.

    model = ElectraForPreTraining(discriminator_config)          # generator: 1/4 the width
    out = model.apply({"params": p}, ids, mask, segments, positions, masked_lm_ids, weights,
                      rngs={"sample": key})

The generator's sampled tokens (Gumbel-max at temperature 1, `jax.random.categorical`) replace
the masked positions; sampling is outside the gradient, so the discriminator's loss reaches the
generator only through the shared embeddings, as in the paper. Parameters:
`bert` + `discriminator` are the discriminator (`BertForReplacedTokenDetection`'s layout, so it
exports as transformers' ElectraForPreTraining and fine-tunes like any encoder); `generator`
holds the generator's projection, encoder and masked-LM head (`generator_params` rebuilds a
`BertForPreTraining(use_nsp=False)` tree from it and the shared tables: ElectraForMaskedLM).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from bert_jax.arch.bert.heads import DiscriminatorHead, MaskedLMHead
from bert_jax.arch.bert.model import BertModel
from bert_jax.config import BertConfig
from bert_jax.model.encoder import Encoder
from bert_jax.model.layers import constrain_batch, dense, embed_axis

DEFAULT_GENERATOR_SIZE = 0.25  # the paper's best generator: 1/4 to 1/2 the discriminator's width


def generator_config(disc: BertConfig, size: float = DEFAULT_GENERATOR_SIZE) -> BertConfig:
    """The generator: the discriminator's depth at `size` times its width, with heads of 64
    (at least one) and FFN 4 H_g (as ELECTRA's training_utils.get_bert_config), reading the
    shared tables of width E = disc.embed_dim (so a projection E -> H_g unless they are equal)."""
    if not 0.0 < size <= 1.0:
        raise ValueError(f"generator size {size}: must be in (0, 1]")
    hidden = max(1, round(disc.hidden_size * size))
    heads = max(1, hidden // 64)
    while hidden % heads:
        heads -= 1
    return disc.replace(
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        embedding_size=None if disc.embed_dim == hidden else disc.embed_dim,
    )


@flax.struct.dataclass
class ElectraOutput:
    mlm_logits: jax.Array  # B x P x V, the generator at masked_lm_positions
    disc_logits: jax.Array  # B x L, "this token was replaced"
    replaced: jax.Array  # B x L bool, the discriminator's labels
    sampled_ids: jax.Array  # B x P, the generator's samples at the masked positions


class Generator(nn.Module):
    """Projection (if E != H_g), encoder and masked-LM head of the generator; the tables are the
    discriminator's (passed in as `bert`)."""

    config: BertConfig

    @nn.compact
    def __call__(
        self,
        x_BxLxE: jax.Array,
        mask_BxL: jax.Array,
        positions_BxP: jax.Array,
        bert: BertModel,
        deterministic: bool,
    ) -> jax.Array:
        cfg = self.config
        x_BxLxD = x_BxLxE
        if cfg.embedding_size is not None:
            x_BxLxD = dense(cfg, cfg.hidden_size, (embed_axis(cfg), "embed"), "projection")(x_BxLxE)
        seq_BxLxD, _, _ = Encoder(cfg, name="encoder")(
            constrain_batch(x_BxLxD), mask_BxL.astype(bool), deterministic
        )
        x_BxPxD = jnp.take_along_axis(seq_BxLxD, positions_BxP[..., None], axis=1)
        return MaskedLMHead(cfg, name="predictions")(x_BxPxD, bert)


class ElectraForPreTraining(nn.Module):
    config: BertConfig  # the discriminator's
    generator_size: float = DEFAULT_GENERATOR_SIZE

    def setup(self) -> None:
        self.bert = BertModel(self.config, add_pooling_layer=False)
        self.discriminator = DiscriminatorHead(self.config)
        self.generator = Generator(generator_config(self.config, self.generator_size))

    def __call__(
        self,
        input_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array,
        segment_ids_BxL: jax.Array,
        masked_lm_positions_BxP: jax.Array,
        masked_lm_ids_BxP: jax.Array,
        masked_lm_weights_BxP: jax.Array,
        *,
        deterministic: bool = True,
    ) -> ElectraOutput:
        emb = self.bert.embeddings
        x_BxLxE = emb.embed(input_ids_BxL, segment_ids_BxL, input_mask_BxL, deterministic)
        mlm_BxPxV = self.generator(
            x_BxLxE, input_mask_BxL, masked_lm_positions_BxP, self.bert, deterministic
        )
        # Gumbel-max: argmax(logits + Gumbel noise) is a sample of softmax(logits).
        key = self.make_rng("sample") if self.has_rng("sample") else jax.random.PRNGKey(0)
        sampled_BxP = jax.random.categorical(key, jax.lax.stop_gradient(mlm_BxPxV)).astype(
            input_ids_BxL.dtype
        )
        # Only real prediction slots are written (padding slots point at position 0, [CLS]);
        # out-of-range rows are dropped by the scatter.
        input_ids_BxL = jnp.asarray(input_ids_BxL)
        real_BxP = masked_lm_weights_BxP > 0
        where_BxP = jnp.where(real_BxP, masked_lm_positions_BxP, input_ids_BxL.shape[1])
        rows_Bx1 = jnp.arange(input_ids_BxL.shape[0])[:, None]
        original_BxL = input_ids_BxL.at[rows_Bx1, where_BxP].set(masked_lm_ids_BxP, mode="drop")
        corrupted_BxL = input_ids_BxL.at[rows_Bx1, where_BxP].set(sampled_BxP, mode="drop")
        out = self.bert(
            jax.lax.stop_gradient(corrupted_BxL),
            input_mask_BxL,
            segment_ids_BxL,
            deterministic=deterministic,
        )
        return ElectraOutput(
            mlm_logits=mlm_BxPxV,
            disc_logits=self.discriminator(out.sequence_output),
            replaced=corrupted_BxL != original_BxL,
            sampled_ids=sampled_BxP,
        )


def discriminator_params(params: dict) -> dict:
    """The discriminator's weights (`BertForReplacedTokenDetection` layout, exportable as
    ElectraForPreTraining, graftable into any fine-tuning head)."""
    params = params.get("params", params)
    return {"bert": params["bert"], "discriminator": params["discriminator"]}


def generator_params(params: dict) -> dict:
    """The generator as a `BertForPreTraining(generator_config(...), use_nsp=False)` tree: the
    shared tables plus its own projection, encoder and head (ElectraForMaskedLM on export)."""
    params = params.get("params", params)
    gen: dict[str, Any] = params["generator"]
    tables = {k: v for k, v in params["bert"]["embeddings"].items() if k != "projection"}
    if "projection" in gen:
        tables["projection"] = gen["projection"]
    return {"bert": {"embeddings": tables, "encoder": gen["encoder"]},
            "predictions": gen["predictions"]}  # fmt: skip
