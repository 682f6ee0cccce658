"""Seq2SeqConfig: one encoder-decoder family whose presets are T5 (v1.0, v1.1) and the Transformer.

Architecture fields follow Hugging Face's T5Config names where T5 has them (`d_model`, `d_kv`,
`d_ff`, `num_layers`, ...); the switches that turn T5 into Vaswani et al.'s Transformer
(`position`, `norm`, `use_bias`, ...) are ours. Runtime fields (`dtype`, `scan_layers`,
`remat_policy`) are never written to disk.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from etils import epath

from bert_jax.config import FrozenConfig
from bert_jax.errors import BertJaxError

FEED_FORWARD = ("relu", "gated-gelu", "gated-relu", "gelu")
POSITIONS = ("relative", "sinusoidal")  # T5's bucketed bias | Vaswani's added sin/cos
NORMS = ("rms_pre", "layer_post")  # T5: RMS norm before each sublayer | Transformer: LN after


@dataclasses.dataclass(frozen=True)
class Seq2SeqConfig(FrozenConfig):
    vocab_size: int = 32128
    d_model: int = 512
    d_kv: int = 64
    d_ff: int = 2048
    num_layers: int = 6
    num_decoder_layers: int = 6
    num_heads: int = 8
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    dropout_rate: float = 0.1
    layer_norm_epsilon: float = 1e-6
    feed_forward_proj: str = "relu"
    # The LM head is the shared embedding (else a separate `lm_head`); T5 v1.0 also multiplies
    # the decoder output by d_model**-0.5 then (`scale_decoder_outputs`), v1.1 unties and doesn't.
    tie_word_embeddings: bool = True
    scale_decoder_outputs: bool = True
    position: str = "relative"
    norm: str = "rms_pre"
    use_bias: bool = False  # biases in every dense layer (the Transformer), none in T5
    scale_attention: bool = False  # logits / sqrt(d_kv); T5 folds this into the q init instead
    scale_embeddings: bool = False  # embeddings * sqrt(d_model) (the Transformer)
    max_position: int = 1024  # sinusoidal table length (relative positions need none)
    label_smoothing: float = 0.0  # training loss; the Transformer used 0.1
    pad_token_id: int = 0
    eos_token_id: int = 1
    decoder_start_token_id: int = 0
    family: str = "t5"
    # Runtime choices, not part of the checkpoint.
    dtype: str = "float32"
    scan_layers: bool = False
    remat_policy: str = "none"

    # Sizes that must be >= 1: zero heads divided by zero at init, zero layers trained a model
    # with no encoder or decoder (BERT's presets refuse L0 and A0 the same way).
    SIZES = ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers",
             "num_heads")  # fmt: skip

    def __post_init__(self) -> None:
        for name in self.SIZES:
            if getattr(self, name) < 1:
                raise BertJaxError(f"Seq2SeqConfig.{name} {getattr(self, name)}: must be >= 1")
        checks = (
            (self.feed_forward_proj, FEED_FORWARD, "feed_forward_proj"),
            (self.position, POSITIONS, "position"),
            (self.norm, NORMS, "norm"),
            (self.dtype, ("float32", "bfloat16"), "dtype"),
            (self.remat_policy, ("none", "full", "dots", "dots_no_batch"), "remat_policy"),
        )
        for value, allowed, name in checks:
            if value not in allowed:
                raise BertJaxError(f"Seq2SeqConfig.{name} {value!r}: use one of {allowed}")
        if self.position == "sinusoidal" and self.d_model % 2:
            raise BertJaxError(f"sinusoidal positions need an even d_model, got {self.d_model}")

    @property
    def inner_dim(self) -> int:
        return self.num_heads * self.d_kv

    @property
    def gated(self) -> bool:
        return self.feed_forward_proj.startswith("gated-")

    def weight_flops_per_sequence(self, inputs_length: int, targets_length: int) -> float:
        """Matmul weight MACs per (inputs, targets) pair: the encoder over the inputs, the
        decoder (self + cross attention) and the LM head over the targets."""
        ff = self.d_model * self.d_ff * (3 if self.gated else 2)
        enc = self.num_layers * (4 * self.d_model * self.inner_dim + ff)
        dec = self.num_decoder_layers * (8 * self.d_model * self.inner_dim + ff)
        dec += self.d_model * self.vocab_size
        return float(enc * inputs_length + dec * targets_length)

    def saved_elements_per_sequence(self, inputs_length: int, targets_length: int) -> float:
        """Activation elements an ideally fused step keeps for its backward pass (pre-norm
        layers): per encoder token and layer the input, both norms' outputs and the residual sum
        (4 d), q, k, v and the context (4 h k), the FFN's projection (f, 2 f gated); per target
        token and decoder layer 6 d, self and cross q/k/v/context (6 h k) and the FFN; per
        input token and decoder layer the cross-attention's keys and values (2 h k); the final
        norms' inputs (d a token; the logits never leave a fused cross-entropy)."""
        d, a = self.d_model, self.inner_dim
        ff = self.d_ff * (2 if self.gated else 1)
        enc = self.num_layers * (4 * d + 4 * a + ff) + d
        dec = self.num_decoder_layers * (6 * d + 6 * a + ff) + d
        cross = self.num_decoder_layers * 2 * a
        return float(inputs_length * (enc + cross) + targets_length * dec)

    RUNTIME = ("dtype", "scan_layers", "remat_policy")

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "config", **runtime: Any) -> Seq2SeqConfig:
        unknown = sorted(set(d) - set(cls.saved_fields()))
        if unknown:  # our own files: a stray key is a typo or a file of another version
            raise BertJaxError(f"{source}: unknown Seq2SeqConfig fields {unknown}")
        # a BertJaxError is a field's value, named
        return cls.from_saved(d, source, runtime, wrap=(TypeError, BertJaxError))

    def save(self, path: epath.PathLike) -> None:
        epath.Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True))

    @classmethod
    def load(cls, path: epath.PathLike, **runtime: Any) -> Seq2SeqConfig:
        p = epath.Path(path)
        try:
            d = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise BertJaxError(f"{p}: cannot read a Seq2SeqConfig ({e})") from None
        return cls.from_dict(d, str(p), **runtime)


_T5_V1_0 = dict(feed_forward_proj="relu", tie_word_embeddings=True, scale_decoder_outputs=True)
_T5_V1_1 = dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                scale_decoder_outputs=False)  # fmt: skip
_SIZES = {  # d_model, d_kv, d_ff (v1.0), d_ff (v1.1), layers, heads; T5 paper and HF configs
    "small": (512, 64, 2048, 1024, 6, 8),
    "base": (768, 64, 3072, 2048, 12, 12),
    "large": (1024, 64, 4096, 2816, 24, 16),
}
_TRANSFORMER_BASE = dict(
    family="transformer", d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_decoder_layers=6,
    num_heads=8, feed_forward_proj="relu", position="sinusoidal", norm="layer_post",
    use_bias=True, scale_attention=True, scale_embeddings=True, tie_word_embeddings=True,
    scale_decoder_outputs=False, label_smoothing=0.1, layer_norm_epsilon=1e-6, vocab_size=37000,
)  # fmt: skip


def seq2seq_preset(name: str, **overrides: Any) -> Seq2SeqConfig:
    """`t5-{small,base,large}` (v1.0), `t5-v1_1-{small,base,large}`, `transformer-base`."""
    if name == "transformer-base":
        return Seq2SeqConfig(**{**_TRANSFORMER_BASE, **overrides})
    for size, (d, kv, ff10, ff11, layers, heads) in _SIZES.items():
        for prefix, layout, ff in (("t5-", _T5_V1_0, ff10), ("t5-v1_1-", _T5_V1_1, ff11)):
            if name == prefix + size:
                sizes = dict(d_model=d, d_kv=kv, d_ff=ff, num_layers=layers,
                              num_decoder_layers=layers, num_heads=heads)  # fmt: skip
                return Seq2SeqConfig(**{**sizes, **layout, **overrides})
    known = [f"{p}{s}" for p in ("t5-", "t5-v1_1-") for s in _SIZES] + ["transformer-base"]
    raise BertJaxError(f"seq2seq preset {name!r}: use one of {known}")
