"""BertConfig: the reference fields, json in and out (reference and Hugging Face), presets.

Architecture fields are what `bert_config.json` / HF `config.json` store. The runtime fields
(`dtype`, `scan_layers`, `remat_policy`, `attention_implementation`) choose how the same weights
are computed and are never written to disk.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, ClassVar, Self

from bert_jax.atomic_write import read_json, write_json_atomic
from bert_jax.errors import BertJaxError

# hidden_act values and whether they mean the tanh approximation of GELU. HF's "gelu" is exact erf
# (as the original BERT checkpoints were trained); "gelu_new" & co. are the later tanh form.
GELU_ACTIVATIONS = {
    "gelu": False,
    "gelu_exact": False,
    "gelu_new": True,
    "gelu_pytorch_tanh": True,
    "gelu_fast": True,
    "gelu_tanh": True,
}
REMAT_POLICIES = ("none", "full", "dots", "dots_no_batch")
# Cross-layer parameter sharing (ALBERT): which half of every layer is one set of weights.
SHARE_LAYERS = ("none", "all", "attention", "ffn")
# The kernels bert_jax.model.attention_core.attend can run: "xla" (the reference, every backend),
# "cudnn" (NVIDIA GPU, bfloat16), "splash" (TPU), "auto" (the fused kernel where the step's
# platform and shapes allow it, else xla).
ATTENTION_IMPLEMENTATIONS = ("xla", "cudnn", "splash", "auto")


class FrozenConfig:
    """What the frozen config dataclasses (here and in bert_jax.arch) share: `replace`, the dict
    of the fields a config.json stores, and building one from such a dict."""

    RUNTIME: ClassVar[tuple[str, ...]] = ()  # fields that choose how to compute, never saved

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)

    @classmethod
    def saved_fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in cls.RUNTIME)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.saved_fields()}

    @classmethod
    def from_saved(
        cls,
        d: dict[str, Any],
        source: str,
        runtime: dict[str, Any],
        wrap: tuple[type[Exception], ...] = (TypeError,),
    ) -> Self:
        """The saved fields of `d` (other keys ignored) plus `runtime`; an error of a type in
        `wrap` is re-raised naming `source`, so the user learns which file is wrong."""
        known = {k: d[k] for k in cls.saved_fields() if k in d}
        try:
            return cls(**known, **runtime)
        except wrap as e:
            raise BertJaxError(f"{source}: {e}") from None


@dataclasses.dataclass(frozen=True)
class BertConfig(FrozenConfig):
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2  # 0 (DistilBERT): no token-type embeddings, segment ids ignored
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    # Left-to-right attention (each position sees itself and earlier ones): the paper's LTR
    # ablation, in pretraining and fine-tuning; sentence heads then read the last real token.
    causal: bool = False
    # ---- family switches (bert_jax/arch/bert/variants/ presets them; the defaults are BERT) ----
    # Factorised embeddings (ALBERT, ELECTRA): tables of width embedding_size, then a dense layer
    # to hidden_size. None: tables of width hidden_size and no projection.
    embedding_size: int | None = None
    share_layers: str = "none"  # one of SHARE_LAYERS; "all" applies one layer N times
    # RoBERTa: real tokens take position ids position_offset, position_offset + 1, ... (its
    # padding id + 1) and padding takes position_offset - 1; 0 is BERT's 0, 1, ... for every slot.
    position_offset: int = 0
    pooler: bool = True  # the tanh layer on [CLS]; DistilBERT and ELECTRA have none
    family: str = "bert"  # whose Hugging Face names and classes the weights map to
    # Runtime choices, not part of the checkpoint.
    dtype: str = "float32"  # compute dtype; parameters always float32
    scan_layers: bool = False
    remat_policy: str = "none"
    # Which kernel computes attention (bert_jax.model.attention_core.IMPLEMENTATIONS); "xla" is
    # the reference every other kernel is tested against.
    attention_implementation: str = "xla"

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise BertJaxError(
                f"hidden_size {self.hidden_size} is not divisible by "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.hidden_act not in GELU_ACTIVATIONS:
            raise BertJaxError(
                f"hidden_act {self.hidden_act!r} unsupported; use one of {sorted(GELU_ACTIVATIONS)}"
            )
        if self.dtype not in ("float32", "bfloat16"):
            raise BertJaxError(f"dtype {self.dtype!r}: use float32 or bfloat16")
        if self.remat_policy not in REMAT_POLICIES:
            raise BertJaxError(f"remat_policy {self.remat_policy!r}: use one of {REMAT_POLICIES}")
        if self.attention_implementation not in ATTENTION_IMPLEMENTATIONS:
            raise BertJaxError(
                f"attention_implementation {self.attention_implementation!r}: use one of "
                f"{ATTENTION_IMPLEMENTATIONS}"
            )
        fused = self.attention_implementation not in ("xla", "auto")
        if fused and self.attention_probs_dropout_prob > 0:
            raise BertJaxError(
                f"attention_implementation {self.attention_implementation!r} with "
                f"attention_probs_dropout_prob {self.attention_probs_dropout_prob}: the fused "
                "kernels keep no probabilities to drop; set it to 0 or use xla"
            )
        if self.share_layers not in SHARE_LAYERS:
            raise BertJaxError(f"share_layers {self.share_layers!r}: use one of {SHARE_LAYERS}")
        if self.embedding_size is not None and self.embedding_size <= 0:
            raise BertJaxError(f"embedding_size {self.embedding_size}: must be positive (or None)")
        if self.type_vocab_size < 0:
            raise BertJaxError(f"type_vocab_size {self.type_vocab_size}: must be >= 0")
        if not 0 <= self.position_offset < self.max_position_embeddings:
            raise BertJaxError(
                f"position_offset {self.position_offset}: must be in [0, "
                f"max_position_embeddings {self.max_position_embeddings})"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def embed_dim(self) -> int:
        """Width of the embedding tables (and of the MLM head's transform)."""
        return self.hidden_size if self.embedding_size is None else self.embedding_size

    @property
    def max_sequence_length(self) -> int:
        """The longest input the position embeddings cover."""
        return self.max_position_embeddings - self.position_offset

    @property
    def gelu_approximate(self) -> bool:
        return GELU_ACTIVATIONS[self.hidden_act]

    # ---- serialisation -------------------------------------------------------------------------
    RUNTIME = ("dtype", "scan_layers", "remat_policy", "attention_implementation")
    # The fields Hugging Face's BertConfig has (the family switches live in bert_jax.interop).
    HF_BERT_FIELDS = (
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob",
        "max_position_embeddings", "type_vocab_size", "initializer_range", "layer_norm_eps",
    )  # fmt: skip

    def to_hf_dict(self) -> dict[str, Any]:
        """transformers' BertConfig; causal attention is its decoder mode."""
        return {
            "architectures": ["BertForPreTraining"],
            "model_type": "bert",
            **{k: getattr(self, k) for k in self.HF_BERT_FIELDS},
            "is_decoder": self.causal,
            "pad_token_id": 0,
            "position_embedding_type": "absolute",
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "config", **runtime: Any) -> BertConfig:
        model_type = d.get("model_type", "bert")
        if model_type != "bert":
            raise BertJaxError(f"{source}: model_type {model_type!r} is not a BERT model")
        if d.get("position_embedding_type", "absolute") != "absolute":
            raise BertJaxError(f"{source}: only absolute position embeddings are supported")
        if "vocab_size" not in d:
            raise BertJaxError(f"{source}: has no vocab_size")
        return cls.from_saved(d, source, runtime)

    @classmethod
    def from_json_file(cls, path: str | os.PathLike, **runtime: Any) -> BertConfig:
        d = read_json(path, f"{path}: no such config file")
        return cls.from_dict(d, source=str(path), **runtime)

    def to_json_file(self, path: str | os.PathLike, hugging_face: bool = False) -> None:
        d = self.to_hf_dict() if hugging_face else self.to_dict()
        write_json_atomic(path, d, sort_keys=True)  # local or gs://


# ---- presets -----------------------------------------------------------------------------------
# Turc et al. 2019 compact models: L in {2..12}, H in {128..768}, A = H/64, I = 4H.
ALIASES = {
    "tiny": "L2-H128",
    "mini": "L4-H256",
    "small": "L4-H512",
    "medium": "L8-H512",
    "base": "L12-H768",
}
_COMPACT = re.compile(r"^L(\d+)-H(\d+)$")
# Any shape, as the paper's Table 6 grid needs: L layers, H hidden, A heads (H % A == 0), I = 4H.
_SHAPE = re.compile(r"^L(\d+)-H(\d+)-A(\d+)$")


def preset_names() -> list[str]:
    sizes = [f"L{layers}-H{h}" for layers in (2, 4, 6, 8, 10, 12) for h in (128, 256, 512, 768)]
    return sizes + [*ALIASES, "large"]


def shape_dims(name: str) -> tuple[int, int, int] | None:
    """(L, H, A) of an `L<layers>-H<hidden>-A<heads>` name, None for any other name; refused
    when L or A is 0 or A does not divide H."""
    shape = _SHAPE.match(name)
    if not shape:
        return None
    layers, hidden, heads = (int(g) for g in shape.groups())
    if not (layers and heads) or hidden % heads:
        raise BertJaxError(f"model {name!r}: needs L, A > 0 and H divisible by A")
    return layers, hidden, heads


def preset(name: str, **overrides: Any) -> BertConfig:
    """A named model size: `tiny`, `mini`, `small`, `medium`, `base`, `large`, e.g. `L4-H256`
    (A = H/64), or any `L<layers>-H<hidden>-A<heads>` (e.g. `L6-H768-A3`)."""
    dims = shape_dims(name)
    if dims:
        layers, hidden, heads = dims
        return BertConfig(
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=4 * hidden,
        ).replace(**overrides)
    if name == "large":
        cfg = BertConfig(
            hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096
        )
    else:
        m = _COMPACT.match(ALIASES.get(name, name))
        if not m or name not in preset_names():
            raise BertJaxError(
                f"unknown model preset {name!r}; known: {', '.join(preset_names())}, or any "
                "L<layers>-H<hidden>-A<heads>"
            )
        layers, hidden = int(m.group(1)), int(m.group(2))
        cfg = BertConfig(
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=hidden // 64,
            intermediate_size=4 * hidden,
        )
    return cfg.replace(**overrides)
