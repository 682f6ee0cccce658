"""Hugging Face XLNet directories (config.json + model.safetensors) in and out.

`XLNetLMHeadModel` saves its encoder under `transformer.` plus `lm_loss.bias` (its `lm_loss.weight`
is the tied word embedding); `XLNetModel` saves the encoder's names bare. Both read into the tree
of `bert_jax.model.xlnet.XLNetLM` ({"transformer": ..., "lm_loss_bias": ...}); a bare encoder
gets a zero output bias and `has_lm_head=False`. Every tensor keeps HF's shape except the
feed-forward kernels (torch Linear stores [out, in]) and `mask_emb` ([1, 1, D] -> [D]).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
from etils import epath

from bert_jax.atomic_write import read_json, write_bytes_atomic, write_json_atomic
from bert_jax.errors import BertJaxError
from bert_jax.interop.hf import _open_weights
from bert_jax.interop.model_kind import model_kind
from bert_jax.model.xlnet.config import XLNetConfig

_ATTN = ("q", "k", "v", "o", "r", "r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")
# Fine-tuning heads of HF's task classes: HF name -> our path (torch Linear weights transposed).
HEADS = {
    "sequence_summary.summary": ("summary",),
    "logits_proj": ("logits_proj",),
    "qa_outputs": ("qa_outputs",),
    "classifier": ("classifier",),
}


def _names(cfg: XLNetConfig) -> Iterator[tuple[str, tuple[str, ...], str]]:
    """(HF name without prefix, our path under `transformer`, kind) of every encoder weight."""
    yield "word_embedding.weight", ("word_embedding", "embedding"), "same"
    yield "mask_emb", ("mask_emb",), "mask_emb"
    for i in range(cfg.n_layer):
        hf, ours = f"layer.{i}", (f"layer_{i}",)
        for n in _ATTN:
            yield f"{hf}.rel_attn.{n}", ours + ("rel_attn", n), "same"
        for block in ("rel_attn", "ff"):
            yield f"{hf}.{block}.layer_norm.weight", ours + (block, "layer_norm", "scale"), "same"
            yield f"{hf}.{block}.layer_norm.bias", ours + (block, "layer_norm", "bias"), "same"
        for lin in ("layer_1", "layer_2"):
            yield f"{hf}.ff.{lin}.weight", ours + ("ff", lin, "kernel"), "linear"
            yield f"{hf}.ff.{lin}.bias", ours + ("ff", lin, "bias"), "same"


def _set(tree: dict, path: tuple[str, ...], value: np.ndarray) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def _get(tree: dict, path: tuple[str, ...]) -> np.ndarray:
    for key in path:
        tree = tree[key]
    return np.asarray(tree, np.float32)


def is_xlnet_dir(path: str | os.PathLike) -> bool:
    return model_kind(path) == "xlnet"


def read_xlnet_dir(path: str | os.PathLike, **runtime) -> tuple[XLNetConfig, dict, bool]:
    """(config, XLNetLM params, has_lm_head) from an HF XLNetModel / XLNetLMHeadModel directory;
    a task class's directory (XLNetForSequenceClassification, XLNetForQuestionAnsweringSimple)
    also gives its head's parameters (`HEADS`), for `bert_jax.model.xlnet.heads`."""
    path = epath.Path(path)
    config_file = path / "config.json"
    raw = read_json(config_file, f"{path}: no config.json next to the safetensors weights")
    cfg = XLNetConfig.from_hf(raw, str(config_file), **runtime)
    source, shapes, read = _open_weights(path)
    prefix = "transformer." if "transformer.word_embedding.weight" in shapes else ""
    encoder: dict = {}
    for name, ours, kind in _names(cfg):
        key = prefix + name
        if key not in shapes:
            raise BertJaxError(f"{source}: missing {key} (config.json says n_layer={cfg.n_layer})")
        x = read(key)
        x = x.T if kind == "linear" else x.reshape(-1) if kind == "mask_emb" else x
        _set(encoder, ours, x)
    d, v = cfg.d_model, cfg.vocab_size
    if encoder["word_embedding"]["embedding"].shape != (v, d):
        raise BertJaxError(f"{source}: word_embedding is not [{v}, {d}] as config.json says")
    has_head = "lm_loss.bias" in shapes
    bias = read("lm_loss.bias") if has_head else np.zeros((v,), np.float32)
    params = {"transformer": encoder, "lm_loss_bias": bias}
    for hf_name, ours in HEADS.items():  # a task class's head (heads.py) rides along
        if f"{hf_name}.weight" in shapes:
            _set(params, ours + ("kernel",), read(f"{hf_name}.weight").T)
            _set(params, ours + ("bias",), read(f"{hf_name}.bias"))
    return cfg, params, has_head


def export_xlnet(
    cfg: XLNetConfig,
    params: dict,
    output_dir: str | os.PathLike,
    spiece_model: str | os.PathLike | None = None,
    with_lm_head: bool = True,
) -> epath.Path:
    """Write config.json + model.safetensors that transformers' XLNetLMHeadModel (or, without the
    head, XLNetModel) loads; `spiece_model` is copied beside them for XLNetTokenizer."""
    from flax.core import meta
    from safetensors.numpy import save

    params = meta.unbox(params)
    params = params.get("params", params)
    encoder = params.get("transformer", params)
    prefix = "transformer." if with_lm_head else ""
    tensors = {}
    for name, ours, kind in _names(cfg):
        x = _get(encoder, ours)
        x = x.T if kind == "linear" else x.reshape(1, 1, -1) if kind == "mask_emb" else x
        tensors[prefix + name] = np.ascontiguousarray(x)
    hf = cfg.to_hf()
    if with_lm_head:
        tensors["lm_loss.bias"] = _get(params, ("lm_loss_bias",))
        tensors["lm_loss.weight"] = tensors["transformer.word_embedding.weight"]
    else:
        hf["architectures"] = ["XLNetModel"]
    out = epath.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(out / "model.safetensors", save(tensors, metadata={"format": "pt"}))
    write_json_atomic(out / "config.json", hf)
    if spiece_model is not None:
        write_bytes_atomic(out / "spiece.model", epath.Path(spiece_model).read_bytes())
    return out


def convert_xlnet(model_dir: str | os.PathLike, output_dir: str | os.PathLike) -> str:
    """`bert-jax convert` of an XLNet directory: read into our tree and written back (encoder, LM
    head if present, spiece.model); a task class's head is not exported."""
    cfg, params, has_head = read_xlnet_dir(model_dir)
    spiece = epath.Path(model_dir) / "spiece.model"
    out = export_xlnet(cfg, params, output_dir, spiece if spiece.exists() else None, has_head)
    arch = "XLNetLMHeadModel" if has_head else "XLNetModel"
    return (
        f"wrote {out} ({arch}, n_layer={cfg.n_layer} d_model={cfg.d_model}; tokenizer: "
        f"{'spiece.model' if spiece.exists() else 'none'})"
    )
