"""One table mapping every weight of the encoder family between our Flax tree and the checkpoint
layouts: the reference's TF names and Hugging Face's names for each family.

The reference's TF variable names and TF layouts (dense kernels `[in, out]`) are the canonical
form: our tree differs only by reshapes (per-head attention kernels) and the NSP transpose. Hugging
Face's BERT names differ by punctuation, and its Linear weights are `[out, in]`; the other
families' names are renames of BERT's (each variant's `hf_names`, `bert_jax.arch.bert.variants`).
Weights that BERT does not have get canonical names in the same style: the embedding projection
is ALBERT's TF name `bert/encoder/embedding_hidden_mapping_in`, shared layers live under
`bert/encoder/shared/`, the replaced-token head is ELECTRA's `discriminator_predictions/`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from bert_jax.arch.bert.variants import VARIANTS, HfNames
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.model.encoder import SHARED_HALVES

# Head groups a checkpoint may or may not carry. The encoder is always required.
GROUPS = ("encoder", "pooler", "mlm", "nsp", "rtd")


# Non-persistent buffers that older transformers versions saved.
HF_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


def hf_family(family: str) -> HfNames:
    """How `family`'s Hugging Face checkpoints name the weights (`bert_jax.arch.bert.variants`)."""
    if family not in VARIANTS:
        raise BertJaxError(f"family {family!r} has no Hugging Face names; known: "
                           f"{', '.join(VARIANTS)}")  # fmt: skip
    return VARIANTS[family].hf_names


@dataclasses.dataclass(frozen=True)
class Weight:
    tf_name: str  # e.g. bert/encoder/layer_3/attention/self/query/kernel
    path: tuple[str, ...]  # into our (looped, unboxed) pretraining-model params
    tf_shape: tuple[int, ...]
    our_shape: tuple[int, ...]
    group: str
    family: str = "bert"  # whose Hugging Face name `hf_name` gives

    def to_ours(self, x_tf: np.ndarray) -> np.ndarray:
        if self.tf_name.endswith("seq_relationship/output_weights"):
            return np.ascontiguousarray(x_tf.T)  # TF keeps [2, H] and multiplies transposed
        return x_tf.reshape(self.our_shape)

    def from_ours(self, x: np.ndarray) -> np.ndarray:
        if self.tf_name.endswith("seq_relationship/output_weights"):
            return np.ascontiguousarray(x.T)
        return x.reshape(self.tf_shape)

    @property
    def hf_name(self) -> str:
        return hf_name(self.tf_name, self.family)

    @property
    def hf_transposed(self) -> bool:
        """HF stores torch.nn.Linear weights `[out, in]`, the transpose of TF dense kernels."""
        return self.tf_name.endswith("/kernel")

    @property
    def hf_shape(self) -> tuple[int, ...]:
        return self.tf_shape[::-1] if self.hf_transposed else self.tf_shape


def hf_name(tf_name: str, family: str = "bert") -> str:
    name = re.sub(r"layer_(\d+)", r"layer.\1", tf_name)
    name = name.replace("cls/predictions/output_bias", "cls/predictions/bias")
    name = name.replace("seq_relationship/output_weights", "seq_relationship/weight")
    name = name.replace("seq_relationship/output_bias", "seq_relationship/bias")
    name = re.sub(r"/(gamma|kernel)$", "/weight", name)
    name = re.sub(r"/beta$", "/bias", name)
    if name.endswith("_embeddings"):
        name += "/weight"
    name = name.replace("/", ".")
    for pattern, replacement in hf_family(family).renames:
        name = re.sub(pattern, replacement, name)
    return name


def weights(config: BertConfig) -> list[Weight]:
    """Every weight of the pretraining model for `config` (encoder, pooler, and the mlm, nsp and
    rtd heads), in the reference's order, named for `config.family`."""
    d, i, n = config.hidden_size, config.intermediate_size, config.num_attention_heads
    e = config.embed_dim
    hk = (n, d // n)
    out: list[Weight] = []

    def add(tf_name, path, tf_shape, our_shape=None, group="encoder"):
        w = Weight(tf_name, tuple(path), tf_shape, our_shape or tf_shape, group, config.family)
        out.append(w)

    def layer_norm(tf_scope, path, group="encoder", width=d):
        add(f"{tf_scope}/LayerNorm/gamma", (*path, "scale"), (width,), group=group)
        add(f"{tf_scope}/LayerNorm/beta", (*path, "bias"), (width,), group=group)

    def dense(tf_scope, path, n_in, n_out, group="encoder"):
        add(f"{tf_scope}/kernel", (*path, "kernel"), (n_in, n_out), group=group)
        add(f"{tf_scope}/bias", (*path, "bias"), (n_out,), group=group)

    def attention_half(tf, ours):
        for qkv in ("query", "key", "value"):
            add(f"{tf}/attention/self/{qkv}/kernel", (*ours, "attention", qkv, "kernel"),
                (d, d), (d, *hk))  # fmt: skip
            add(f"{tf}/attention/self/{qkv}/bias", (*ours, "attention", qkv, "bias"), (d,), hk)
        add(f"{tf}/attention/output/dense/kernel", (*ours, "attention", "output", "kernel"),
            (d, d), (*hk, d))  # fmt: skip
        add(f"{tf}/attention/output/dense/bias", (*ours, "attention", "output", "bias"), (d,))
        layer_norm(f"{tf}/attention/output", (*ours, "attention_layer_norm"))

    def ffn_half(tf, ours):
        dense(f"{tf}/intermediate/dense", (*ours, "intermediate"), d, i)
        dense(f"{tf}/output/dense", (*ours, "output"), i, d)
        layer_norm(f"{tf}/output", (*ours, "output_layer_norm"))

    halves = {"attention": attention_half, "ffn": ffn_half}
    emb = ("bert", "embeddings")
    add("bert/embeddings/word_embeddings", (*emb, "word_embeddings", "embedding"),
        (config.vocab_size, e))  # fmt: skip
    if config.type_vocab_size:
        add("bert/embeddings/token_type_embeddings", (*emb, "token_type_embeddings", "embedding"),
            (config.type_vocab_size, e))  # fmt: skip
    add("bert/embeddings/position_embeddings", (*emb, "position_embeddings", "embedding"),
        (config.max_position_embeddings, e))  # fmt: skip
    layer_norm("bert/embeddings", (*emb, "layer_norm"), width=e)
    if config.embedding_size is not None:
        dense("bert/encoder/embedding_hidden_mapping_in", (*emb, "projection"), e, d)
    shared = SHARED_HALVES[config.share_layers]
    for half in shared:
        halves[half]("bert/encoder/shared", ("bert", "encoder", "shared"))
    for layer in range(config.num_hidden_layers):
        for half, add_half in halves.items():
            if half not in shared:
                add_half(f"bert/encoder/layer_{layer}", ("bert", "encoder", f"layer_{layer}"))
    if config.pooler:
        dense("bert/pooler/dense", ("bert", "pooler"), d, d, group="pooler")
    dense("cls/predictions/transform/dense", ("predictions", "transform"), d, e, group="mlm")
    layer_norm("cls/predictions/transform", ("predictions", "transform_layer_norm"), group="mlm",
               width=e)  # fmt: skip
    add("cls/predictions/output_bias", ("predictions", "output_bias"), (config.vocab_size,),
        group="mlm")  # fmt: skip
    if config.pooler:
        add("cls/seq_relationship/output_weights", ("seq_relationship", "kernel"), (2, d), (d, 2),
            group="nsp")  # fmt: skip
        add("cls/seq_relationship/output_bias", ("seq_relationship", "bias"), (2,), group="nsp")
    rtd = ("discriminator_predictions", "discriminator")
    dense(f"{rtd[0]}/dense", (rtd[1], "transform"), d, d, group="rtd")
    dense(f"{rtd[0]}/dense_prediction", (rtd[1], "prediction"), d, 1, group="rtd")
    return out


def get_path(tree: dict, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def set_path(tree: dict, path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def present_groups(params: dict, config: BertConfig) -> tuple[str, ...]:
    """Which of GROUPS a (looped, unboxed) parameter tree holds completely."""
    by_group: dict[str, list[bool]] = {}
    for w in weights(config):
        by_group.setdefault(w.group, []).append(get_path(params, w.path) is not None)
    return tuple(g for g in GROUPS if by_group.get(g) and all(by_group[g]))
