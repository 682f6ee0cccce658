"""ModernBertConfig: the fields of transformers' ModernBertConfig that change the computation,
json in and out in its format, and the size presets.

Architecture fields keep Hugging Face's names. The runtime fields (`dtype`, `scan_layers`,
`remat_policy`, `attention_implementation`) choose how the same weights are computed and are
never written to disk. Layers 0, n, 2n, ... (n = `global_attn_every_n_layers`) attend globally
with rotary theta `global_rope_theta`; the others see keys at most `local_attention // 2`
positions away, with theta `local_rope_theta`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bert_jax.config import ATTENTION_IMPLEMENTATIONS, REMAT_POLICIES, FrozenConfig
from bert_jax.errors import BertJaxError

ACTIVATIONS = {"gelu": False, "gelu_new": True, "gelu_pytorch_tanh": True}  # -> tanh approx.
POOLINGS = ("cls", "mean")


@dataclasses.dataclass(frozen=True)
class ModernBertConfig(FrozenConfig):
    vocab_size: int = 50368
    hidden_size: int = 768
    intermediate_size: int = 1152  # the GeGLU's inner width (Wi projects to twice this)
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    hidden_activation: str = "gelu"
    max_position_embeddings: int = 8192
    initializer_range: float = 0.02
    norm_eps: float = 1e-5
    norm_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    decoder_bias: bool = True
    classifier_bias: bool = False
    classifier_activation: str = "gelu"
    classifier_pooling: str = "cls"
    embedding_dropout: float = 0.0
    attention_dropout: float = 0.0
    mlp_dropout: float = 0.0
    classifier_dropout: float = 0.0
    local_attention: int = 128
    global_attn_every_n_layers: int = 3
    global_rope_theta: float = 160_000.0
    local_rope_theta: float = 10_000.0
    pad_token_id: int = 50283
    cls_token_id: int = 50281
    sep_token_id: int = 50282
    # Runtime choices, not part of the checkpoint.
    dtype: str = "float32"
    scan_layers: bool = False
    remat_policy: str = "none"
    attention_implementation: str = "xla"

    def __post_init__(self) -> None:
        checks = (
            (self.hidden_size % self.num_attention_heads == 0, "hidden_size",
             f"not divisible by num_attention_heads {self.num_attention_heads}"),
            ((self.hidden_size // self.num_attention_heads) % 2 == 0, "hidden_size",
             "gives an odd head size (rotary positions rotate pairs)"),
            (self.hidden_activation in ACTIVATIONS, "hidden_activation",
             f"use one of {sorted(ACTIVATIONS)}"),
            (self.classifier_activation in ACTIVATIONS, "classifier_activation",
             f"use one of {sorted(ACTIVATIONS)}"),
            (self.classifier_pooling in POOLINGS, "classifier_pooling", f"use one of {POOLINGS}"),
            (self.local_attention > 0, "local_attention",
             "must be positive (a local layer sees keys +-local_attention // 2 away)"),
            (self.global_attn_every_n_layers >= 1, "global_attn_every_n_layers", "must be >= 1"),
            (self.dtype in ("float32", "bfloat16"), "dtype", "use float32 or bfloat16"),
            (self.remat_policy in REMAT_POLICIES, "remat_policy", f"use one of {REMAT_POLICIES}"),
            (self.attention_implementation in ATTENTION_IMPLEMENTATIONS,
             "attention_implementation", f"use one of {ATTENTION_IMPLEMENTATIONS}"),
            (self.attention_implementation in ("xla", "auto") or not self.attention_dropout,
             "attention_implementation", "the fused kernels keep no probabilities to drop: "
             "set attention_dropout to 0 or use xla"),
        )  # fmt: skip
        for ok, field, why in checks:
            if not ok:
                raise BertJaxError(f"ModernBertConfig {field}={getattr(self, field)!r}: {why}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def is_global(self, layer: int) -> bool:
        return layer % self.global_attn_every_n_layers == 0

    def layer_types(self) -> list[str]:
        kinds = ("full_attention", "sliding_attention")
        return [kinds[0] if self.is_global(i) else kinds[1] for i in range(self.num_hidden_layers)]

    # ---- Hugging Face config.json ----------------------------------------------------------
    RUNTIME = ("dtype", "scan_layers", "remat_policy", "attention_implementation")

    def to_hf_dict(self) -> dict[str, Any]:
        d = self.to_dict()
        d.update(
            model_type="modernbert",
            layer_types=self.layer_types(),
            rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": self.global_rope_theta},
                "sliding_attention": {"rope_type": "default", "rope_theta": self.local_rope_theta},
            },
            bos_token_id=self.cls_token_id,
            eos_token_id=self.sep_token_id,
            tie_word_embeddings=True,
        )
        return d

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any], source: str = "config", **runtime: Any):
        if d.get("model_type") != "modernbert":
            raise BertJaxError(f"{source}: model_type {d.get('model_type')!r} is not modernbert")
        known = dict(d)  # what rope_parameters and layer_types say overrides the flat fields
        if d.get("rope_scaling"):
            raise BertJaxError(f"{source}: rope_scaling {d['rope_scaling']!r} is unsupported")
        rope = d.get("rope_parameters") or {}
        for kind, field in (("full_attention", "global"), ("sliding_attention", "local")):
            params = rope.get(kind) or {}
            if params.get("rope_type", "default") != "default":
                raise BertJaxError(f"{source}: rope_type {params['rope_type']!r} unsupported")
            if "rope_theta" in params:
                known[f"{field}_rope_theta"] = float(params["rope_theta"])
        if d.get("layer_types") is not None:
            layers = d.get("num_hidden_layers", cls.num_hidden_layers)
            if len(d["layer_types"]) != layers:
                raise BertJaxError(
                    f"{source}: layer_types has {len(d['layer_types'])} entries for "
                    f"num_hidden_layers {layers}"
                )
            known["global_attn_every_n_layers"] = _every_n(d["layer_types"], source)
        if d.get("tie_word_embeddings") is False:
            raise BertJaxError(f"{source}: untied decoder weights are unsupported")
        # name the file whose value is bad
        return cls.from_saved(known, source, runtime, wrap=(TypeError, BertJaxError))


def _every_n(layer_types: list[str], source: str) -> int:
    """The n of a `layer_types` list that is the pattern global, local x (n-1), global, ..."""
    n = next((i for i, t in enumerate(layer_types) if i and t == "full_attention"), 0)
    n = n or len(layer_types)
    expected = ["sliding_attention" if i % n else "full_attention" for i in range(len(layer_types))]
    if list(layer_types) != expected:
        raise BertJaxError(
            f"{source}: layer_types {layer_types} is not a global layer every n layers from 0"
        )
    return n


def preset(name: str, **overrides: Any) -> ModernBertConfig:
    """ModernBERT-base (22 x 768) and -large (28 x 1024) as released; `tiny` (2 x 128) and `mini`
    (4 x 256) for CPU runs, with GeGLU widths 1.5 x hidden as base."""
    sizes = {
        "base": dict(hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
                     intermediate_size=1152),
        "large": dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                      intermediate_size=2624),
        "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=192),
        "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                     intermediate_size=384),
    }  # fmt: skip
    if name not in sizes:
        raise BertJaxError(f"unknown ModernBERT preset {name!r}; known: {', '.join(sizes)}")
    return ModernBertConfig(**{**sizes[name], **overrides})
