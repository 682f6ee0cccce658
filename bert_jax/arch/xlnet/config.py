"""XLNet's hyperparameters, named as Hugging Face's `XLNetConfig` names them (so config.json maps
one to one), plus the runtime knobs of this codebase (dtype, remat)."""

from __future__ import annotations

import dataclasses
from typing import Any

from bert_jax.config import FrozenConfig
from bert_jax.errors import BertJaxError


@dataclasses.dataclass(frozen=True)
class XLNetConfig(FrozenConfig):
    # Every field but the RUNTIME ones is a Hugging Face config.json key this model reads (and
    # writes back on export).
    vocab_size: int = 32000
    d_model: int = 768
    n_layer: int = 12
    n_head: int = 12
    d_inner: int = 3072
    ff_activation: str = "gelu"  # "gelu" (exact erf, as HF's ACT2FN) or "relu"
    attn_type: str = "bi"  # only "bi" (bidirectional, the pretraining/fine-tuning setting)
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1
    initializer_range: float = 0.02
    mem_len: int | None = None  # hidden states kept per layer for the next segment (recurrence)
    reuse_len: int | None = None  # of the current segment, the first `reuse_len` go to memory
    clamp_len: int = -1  # relative distances are clamped to +-clamp_len when > 0
    same_length: bool = False  # only used with attn_type="uni", which is not built
    bi_data: bool = False  # forward+backward position streams: not built
    # Runtime (not in config.json).
    dtype: str = "float32"
    remat: bool = False  # rematerialise each layer in the backward pass

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise BertJaxError(f"XLNet d_model={self.d_model} is not a multiple of n_head")
        if self.attn_type != "bi":
            raise BertJaxError(f"XLNet attn_type={self.attn_type!r}: only 'bi' is built")
        if self.bi_data:
            raise BertJaxError("XLNet bi_data=True (two position streams) is not built")
        if self.ff_activation not in ("gelu", "relu"):
            raise BertJaxError(f"XLNet ff_activation={self.ff_activation!r}: gelu or relu")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_head

    # The duck-typed names bert_jax.model.layers reads (dense/layer_norm/weight_init).
    @property
    def hidden_size(self) -> int:
        return self.d_model

    @property
    def scan_layers(self) -> bool:
        """Layers always run as a Python loop (`layer_{i}`); nn.scan is not built for XLNet."""
        return False

    RUNTIME = ("dtype", "remat")

    @classmethod
    def from_hf(cls, raw: dict[str, Any], source: str = "config.json", **runtime: Any):
        if raw.get("model_type", "xlnet") != "xlnet":
            raise BertJaxError(f"{source}: model_type {raw.get('model_type')!r} is not xlnet")
        if "d_head" in raw and raw["d_head"] != raw["d_model"] // raw["n_head"]:
            raise BertJaxError(f"{source}: d_head != d_model / n_head is not supported")
        return cls.from_saved(raw, source, runtime)

    def to_hf(self) -> dict[str, Any]:
        out = self.to_dict()
        out.update(model_type="xlnet", d_head=self.d_head, architectures=["XLNetLMHeadModel"])
        return out


PRESETS = {
    "tiny": dict(d_model=128, n_layer=2, n_head=2, d_inner=512),
    "small": dict(d_model=512, n_layer=4, n_head=8, d_inner=2048),
    "base": dict(d_model=768, n_layer=12, n_head=12, d_inner=3072),
    "large": dict(d_model=1024, n_layer=24, n_head=16, d_inner=4096),
}


def xlnet_preset(name: str, **overrides: Any) -> XLNetConfig:
    if name not in PRESETS:
        raise BertJaxError(f"XLNet preset {name!r}: use one of {', '.join(PRESETS)}")
    return XLNetConfig(**{**PRESETS[name], **overrides})
