"""ELMo (Peters et al. 2018): a forward and a backward LSTM language model over word inputs, and
the task-specific scalar mix of their layers that BERT's Table 7 compares feature-based BERT to.

Each direction is `num_layers` LSTMs with a projection (LSTMP: the cell's output is projected to
`dim` and that projection is the recurrent state), a residual connection between layers, and the
two directions share the word embedding and the full softmax (ELMo shares its token
representation and softmax; its LSTMs are separate). Built: word input (not the character CNN),
full softmax (not sampled), cell clipping and the char-CNN highway layers are not built.

Layer outputs ([num_layers + 1, B, L, 2 dim]): the embedding (repeated for both directions, as
ELMo's layer 0) and each layer's [forward; backward] states; `ScalarMix` combines them as
gamma * sum_j softmax(w)_j h_j.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.arch.bert.bilstm import BiLSTMTagger


@dataclasses.dataclass(frozen=True)
class ElmoConfig:
    vocab_size: int
    dim: int = 128  # embedding / projection width (ELMo: 512)
    hidden: int = 512  # LSTM cell size (ELMo: 4096)
    num_layers: int = 2
    dropout: float = 0.1


class LSTMPCell(nn.RNNCellBase):
    """An LSTM whose output h is projected to `proj` features; the projection is the state fed
    back (Sak et al. 2014, the cell of ELMo's biLM). The forget gate gets +1 (TF's default)."""

    hidden: int
    proj: int

    @nn.compact
    def __call__(self, carry, x_BxD):
        c_BxH, h_BxP = carry
        z_Bx4H = nn.Dense(4 * self.hidden, name="input")(x_BxD)
        z_Bx4H = z_Bx4H + nn.Dense(4 * self.hidden, use_bias=False, name="recurrent")(h_BxP)
        i, f, g, o = jnp.split(z_Bx4H, 4, axis=-1)
        c_BxH = jax.nn.sigmoid(f + 1.0) * c_BxH + jax.nn.sigmoid(i) * jnp.tanh(g)
        h_BxP = nn.Dense(self.proj, use_bias=False, name="projection")(
            jax.nn.sigmoid(o) * jnp.tanh(c_BxH)
        )
        return (c_BxH, h_BxP), h_BxP

    @nn.nowrap
    def initialize_carry(self, rng, input_shape):
        batch = input_shape[:-1]
        return jnp.zeros(batch + (self.hidden,)), jnp.zeros(batch + (self.proj,))

    @property
    def num_feature_axes(self) -> int:
        return 1


class ElmoBiLM(nn.Module):
    """Returns (forward logits [B, L, V] predicting token t+1 at t, backward logits predicting
    token t-1 at t, layer outputs [num_layers + 1, B, L, 2 dim])."""

    config: ElmoConfig

    @nn.compact
    def __call__(self, ids_BxL: jax.Array, mask_BxL: jax.Array, *, deterministic: bool = True):
        cfg = self.config
        lengths_B = jnp.sum(mask_BxL, axis=-1).astype(jnp.int32)
        drop = nn.Dropout(cfg.dropout, deterministic=deterministic)
        emb_BxLxD = nn.Embed(cfg.vocab_size, cfg.dim, name="embedding")(ids_BxL)
        softmax = nn.Dense(cfg.vocab_size, name="softmax")
        states = {}
        for direction in ("forward", "backward"):
            x_BxLxD = emb_BxLxD
            states[direction] = []
            for i in range(cfg.num_layers):
                rnn = nn.RNN(
                    LSTMPCell(cfg.hidden, cfg.dim), reverse=direction == "backward",
                    keep_order=True, name=f"{direction}_{i}",
                )  # fmt: skip
                y_BxLxD = rnn(drop(x_BxLxD), seq_lengths=lengths_B)
                x_BxLxD = y_BxLxD + x_BxLxD if i > 0 else y_BxLxD  # residual between layers
                states[direction].append(x_BxLxD)
        pairs = zip(states["forward"], states["backward"], strict=True)
        layers = [jnp.concatenate([emb_BxLxD, emb_BxLxD], -1)]
        layers += [jnp.concatenate([f, b], -1) for f, b in pairs]
        fwd_BxLxV = softmax(drop(states["forward"][-1]))
        bwd_BxLxV = softmax(drop(states["backward"][-1]))
        return fwd_BxLxV, bwd_BxLxV, jnp.stack(layers)


class ScalarMix(nn.Module):
    """gamma * sum_j softmax(w)_j h_j over the first axis (ELMo eq. 1)."""

    @nn.compact
    def __call__(self, layers_NxBxLxF: jax.Array) -> jax.Array:
        n = layers_NxBxLxF.shape[0]
        w_N = jax.nn.softmax(self.param("weights", nn.initializers.zeros_init(), (n,)))
        gamma = self.param("gamma", nn.initializers.ones_init(), ())
        return gamma * jnp.einsum("n,nblf->blf", w_N, layers_NxBxLxF.astype(jnp.float32))


class ElmoTagger(nn.Module):
    """Frozen ELMo layers (precomputed, [B, N, L, F]) -> scalar mix -> the feature-based BiLSTM
    tagger of BERT's Table 7 (`bert_jax.arch.bert.bilstm.BiLSTMTagger`)."""

    num_labels: int
    lstm_size: int = 768

    @nn.compact
    def __call__(self, layers_BxNxLxF, input_mask_BxL, *, deterministic: bool = True):
        mixed_BxLxF = ScalarMix(name="scalar_mix")(jnp.moveaxis(layers_BxNxLxF, 1, 0))
        return BiLSTMTagger(self.num_labels, self.lstm_size, name="tagger")(
            mixed_BxLxF, input_mask_BxL, deterministic=deterministic
        )
