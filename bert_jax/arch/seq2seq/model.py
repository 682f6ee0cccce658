"""The encoder-decoder: T5 (pre-RMS-norm, relative position bias) and the Transformer (post-LN,
sinusoidal positions) from one set of modules, switched by `Seq2SeqConfig`.

    model = EncoderDecoder(cfg)
    out = model.apply({"params": p}, enc_ids_BxS, enc_mask_BxS, dec_ids_BxT)   # Seq2SeqOutput
    enc_BxSxD = model.apply(v, ids, mask, method=EncoderDecoder.encode)
    logits, hidden = model.apply(v, dec_ids, enc, enc_mask, method=EncoderDecoder.decode)

Parameter tree: `shared` (the embedding both stacks and, when tied, the LM head use),
`encoder/{relative_attention_bias, layer_i | layers, final_norm}`, `decoder/{...}` with
`cross_attention` in each layer, and `lm_head` when untied. Stacks run their layers in a Python
loop (`layer_i`) or under `nn.scan` (`layers`, leading `layers` axis), optionally rematerialised.
"""

from __future__ import annotations

import math

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from bert_jax.arch.seq2seq.config import Seq2SeqConfig
from bert_jax.arch.seq2seq.layers import (
    NEG_INF,
    Attention,
    FeedForward,
    RelativePositionBias,
    init_normal,
    norm,
    sinusoidal,
)
from bert_jax.model.layers import Embed, constrain_batch

REMAT_POLICIES = {
    "full": None,
    "dots": jax.checkpoint_policies.checkpoint_dots,
    "dots_no_batch": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


@flax.struct.dataclass
class Seq2SeqOutput:
    logits_BxTxV: jax.Array
    encoder_hidden_BxSxD: jax.Array
    decoder_hidden_BxTxD: jax.Array


def _residual(cfg: Seq2SeqConfig, x_BxLxD, sublayer, norm_name: str, drop: nn.Dropout):
    """T5: x + f(norm(x)). The Transformer: norm(x + f(x))."""
    if cfg.norm == "rms_pre":
        return x_BxLxD + drop(sublayer(norm(cfg, norm_name)(x_BxLxD)))
    return norm(cfg, norm_name)(x_BxLxD + drop(sublayer(x_BxLxD)))


class EncoderLayer(nn.Module):
    cfg: Seq2SeqConfig
    deterministic: bool = True

    @nn.compact
    def __call__(self, x_BxLxD: jax.Array, bias_BxHxLxL: jax.Array):
        cfg, det = self.cfg, self.deterministic
        drop = nn.Dropout(cfg.dropout_rate, deterministic=det)
        attn = Attention(cfg, deterministic=det, name="self_attention")
        x_BxLxD = _residual(cfg, x_BxLxD, lambda h: attn(h, bias_BxHxLxL), "self_attention_norm",
                            drop)  # fmt: skip
        x_BxLxD = _residual(cfg, x_BxLxD, FeedForward(cfg, det, name="mlp"), "mlp_norm", drop)
        return constrain_batch(x_BxLxD), None


class DecoderLayer(nn.Module):
    cfg: Seq2SeqConfig
    deterministic: bool = True
    decode: bool = False

    @nn.compact
    def __call__(self, x_BxTxD, self_bias, enc_BxSxD, cross_bias, index):
        cfg, det = self.cfg, self.deterministic
        drop = nn.Dropout(cfg.dropout_rate, deterministic=det)
        attn = Attention(cfg, deterministic=det, name="self_attention")
        x_BxTxD = _residual(
            cfg, x_BxTxD, lambda h: attn(h, self_bias, decode=self.decode, index=index),
            "self_attention_norm", drop,
        )  # fmt: skip
        cross = Attention(cfg, cross=True, deterministic=det, name="cross_attention")
        x_BxTxD = _residual(
            cfg, x_BxTxD, lambda h: cross(h, cross_bias, enc_BxSxD, decode=self.decode),
            "cross_attention_norm", drop,
        )  # fmt: skip
        x_BxTxD = _residual(cfg, x_BxTxD, FeedForward(cfg, det, name="mlp"), "mlp_norm", drop)
        return constrain_batch(x_BxTxD), None


class Stack(nn.Module):
    """The encoder (`is_decoder=False`) or the decoder stack, from embedded tokens to the final
    hidden states (after the final norm for T5, as transformers' last hidden state)."""

    cfg: Seq2SeqConfig
    is_decoder: bool

    @nn.compact
    def __call__(
        self,
        x_BxLxD: jax.Array,
        mask_BxL: jax.Array | None,
        enc_BxSxD: jax.Array | None,
        enc_mask_BxS: jax.Array | None,
        deterministic: bool,
        decode: bool = False,
    ) -> jax.Array:
        cfg = self.cfg
        length = x_BxLxD.shape[1]
        index = None
        step = False  # one decoding step against an existing cache
        if self.is_decoder and decode:
            step = self.has_variable("cache", "index")
            index_var = self.variable("cache", "index", lambda: jnp.zeros((), jnp.int32))
            # The cache length is fixed when it is created (that call passes the full length).
            slots = self.variable("cache", "key_positions", jnp.arange, length, dtype=jnp.int32)
            if step:
                if length != 1:
                    raise ValueError(f"a decoding step takes one token per row, got {length}")
                index = index_var.value
                index_var.value = index + 1
        k_len = slots.value.shape[0] if step else length

        if cfg.position == "sinusoidal":
            table_PxD = jnp.asarray(sinusoidal(max(cfg.max_position, k_len), cfg.d_model))
            pos = table_PxD[index][None, None] if step else table_PxD[:length][None]
            x_BxLxD = x_BxLxD + pos.astype(x_BxLxD.dtype)
            bias = jnp.zeros((1, cfg.num_heads, length, k_len), jnp.float32)
        else:
            rel = RelativePositionBias(cfg, not self.is_decoder, name="relative_attention_bias")
            bias = rel(length, k_len, index)
        if self.is_decoder:
            if step:
                allowed = (slots.value <= index)[None, None, None, :]
            else:
                allowed = jnp.tril(jnp.ones((length, length), bool))[None, None]
            cross_bias = jnp.where(enc_mask_BxS[:, None, None, :].astype(bool), 0.0, NEG_INF)
        else:
            allowed = mask_BxL[:, None, None, :].astype(bool)
            cross_bias = None
        self_bias = jnp.where(allowed, bias, NEG_INF)
        x_BxLxD = nn.Dropout(cfg.dropout_rate)(x_BxLxD, deterministic)

        layer_cls = DecoderLayer if self.is_decoder else EncoderLayer
        if cfg.remat_policy != "none" and not decode:
            layer_cls = nn.remat(layer_cls, policy=REMAT_POLICIES[cfg.remat_policy],
                                 prevent_cse=not cfg.scan_layers)  # fmt: skip
        kw = dict(deterministic=deterministic)
        args: tuple = (self_bias,)
        if self.is_decoder:
            kw["decode"] = decode
            args = (self_bias, enc_BxSxD, cross_bias, index)
        n = cfg.num_decoder_layers if self.is_decoder else cfg.num_layers
        if cfg.scan_layers:
            stack = nn.scan(
                layer_cls,
                variable_axes={"params": 0, "cache": 0},
                split_rngs={"params": True, "dropout": True},
                in_axes=(nn.broadcast,) * len(args),
                length=n,
                metadata_params={nn.PARTITION_NAME: "layers"},
            )(cfg, **kw, name="layers")
            x_BxLxD, _ = stack(x_BxLxD, *args)
        else:
            for i in range(n):
                x_BxLxD, _ = layer_cls(cfg, **kw, name=f"layer_{i}")(x_BxLxD, *args)
        if cfg.norm == "rms_pre":
            x_BxLxD = norm(cfg, "final_norm")(x_BxLxD)
        return nn.Dropout(cfg.dropout_rate)(x_BxLxD, deterministic)


class EncoderDecoder(nn.Module):
    config: Seq2SeqConfig

    def setup(self) -> None:
        cfg = self.config
        # T5 initialises its shared table with stddev 1 (no embedding scale); the Transformer
        # scales by sqrt(d_model), so its table starts at d_model**-0.5.
        std = cfg.d_model**-0.5 if cfg.scale_embeddings else 1.0
        self.shared = Embed(
            cfg.vocab_size, cfg.d_model, dtype=jnp.dtype(cfg.dtype), param_dtype=jnp.float32,
            embedding_init=init_normal(std, ("vocab", "embed")),
        )  # fmt: skip
        self.encoder = Stack(cfg, is_decoder=False)
        self.decoder = Stack(cfg, is_decoder=True)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Dense(
                cfg.vocab_size, use_bias=False, dtype=jnp.dtype(cfg.dtype),
                param_dtype=jnp.float32,
                kernel_init=init_normal(cfg.d_model**-0.5, ("embed", "vocab")),
            )  # fmt: skip

    def _embed(self, ids_BxL: jax.Array) -> jax.Array:
        x_BxLxD = self.shared(ids_BxL)
        if self.config.scale_embeddings:
            x_BxLxD = x_BxLxD * math.sqrt(self.config.d_model)
        return x_BxLxD

    def encode(self, ids_BxS: jax.Array, mask_BxS: jax.Array, deterministic: bool = True):
        return self.encoder(self._embed(ids_BxS), mask_BxS, None, None, deterministic)

    def decode(
        self,
        ids_BxT: jax.Array,
        enc_BxSxD: jax.Array | None,
        enc_mask_BxS: jax.Array,
        deterministic: bool = True,
        decode: bool = False,
    ) -> tuple[jax.Array, jax.Array]:
        """(float32 logits BxTxV, final decoder hidden states BxTxD). With `decode=True` the first
        call creates the cache (ids of the cache length, the encoder output whose keys/values
        cross-attention keeps); each later call is one step (ids Bx1, `enc_BxSxD` unused)."""
        cfg = self.config
        h_BxTxD = self.decoder(self._embed(ids_BxT), None, enc_BxSxD, enc_mask_BxS,
                               deterministic, decode)  # fmt: skip
        if cfg.tie_word_embeddings:
            scaled = h_BxTxD * cfg.d_model**-0.5 if cfg.scale_decoder_outputs else h_BxTxD
            logits_BxTxV = self.shared.attend(scaled)
        else:
            logits_BxTxV = self.lm_head(h_BxTxD)
        return logits_BxTxV.astype(jnp.float32), h_BxTxD

    def __call__(
        self,
        encoder_input_ids_BxS: jax.Array,
        encoder_mask_BxS: jax.Array,
        decoder_input_ids_BxT: jax.Array,
        deterministic: bool = True,
    ) -> Seq2SeqOutput:
        enc_BxSxD = self.encode(encoder_input_ids_BxS, encoder_mask_BxS, deterministic)
        logits, h = self.decode(decoder_input_ids_BxT, enc_BxSxD, encoder_mask_BxS, deterministic)
        return Seq2SeqOutput(logits, enc_BxSxD, h)
