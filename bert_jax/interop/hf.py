"""Hugging Face BERT directories (config.json + model.safetensors) in and out, never unpickling."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import tempfile
from collections.abc import Callable

import numpy as np

from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.interop.assemble import assemble
from bert_jax.interop.names import Weight, get_path, present_groups, weights
from bert_jax.model import unstack_layers

# Old PyTorch-ported checkpoints used TF's LayerNorm names; both spellings are accepted.
_LEGACY = {".LayerNorm.weight": ".LayerNorm.gamma", ".LayerNorm.bias": ".LayerNorm.beta"}
# Buffers and tied copies that carry no weights of their own.
_DERIVED = ("embeddings.position_ids", "cls.predictions.decoder.weight")


def _open_weights(path: pathlib.Path) -> tuple[str, dict[str, tuple[int, ...]], Callable]:
    """(name for messages, key -> shape, key -> array) over model.safetensors or its shards."""
    from safetensors import safe_open

    single, index = path / "model.safetensors", path / "model.safetensors.index.json"
    if single.exists():
        files = {single.name: None}
    elif index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise BertJaxError(f"{index}: not a safetensors index ({e})") from None
        files = {name: None for name in weight_map.values()}
    elif (path / "pytorch_model.bin").exists():
        raise BertJaxError(
            f"{path}: only pytorch_model.bin (a pickle, which bert-jax never loads); save the "
            "model with safetensors (model.save_pretrained(dir, safe_serialization=True))"
        )
    else:
        raise BertJaxError(f"{path}: no model.safetensors")
    handles, owner, shapes = {}, {}, {}
    for name in files:
        try:
            # "flax" rather than "np": numpy has no bfloat16, and some checkpoints are stored in it.
            handles[name] = handle = safe_open(str(path / name), framework="flax")
            for key in handle.keys():  # noqa: SIM118 (not iterable)
                shapes[key] = tuple(handle.get_slice(key).get_shape())
                owner[key] = name
        except Exception as e:  # safetensors raises its own error types for corrupt headers
            raise BertJaxError(f"{path / name}: not a readable safetensors file ({e})") from None

    def read(key: str) -> np.ndarray:
        try:
            return np.asarray(handles[owner[key]].get_tensor(key), dtype=np.float32)
        except Exception as e:
            raise BertJaxError(f"{path / owner[key]}: cannot read {key} ({e})") from None

    source = str(single if len(files) == 1 and single.exists() else path / next(iter(files)))
    return source, shapes, read


def read_hf_dir(
    path: pathlib.Path, config: BertConfig | None = None
) -> tuple[BertConfig, dict, tuple[str, ...], list[str]]:
    """(config, params, groups present, ignored keys) from a Hugging Face BERT directory;
    `config` overrides its config.json."""
    source, shapes, read_tensor = _open_weights(path)
    config_file = path / "config.json"
    if config is None:
        if not config_file.exists():
            raise BertJaxError(f"{path}: no config.json next to the safetensors weights")
        with open(config_file) as f:
            try:
                raw = json.load(f)
            except json.JSONDecodeError as e:
                raise BertJaxError(f"{config_file}: not valid JSON ({e})") from None
        for arch in raw.get("architectures") or []:
            if not arch.startswith("Bert"):
                raise BertJaxError(f"{config_file}: architecture {arch!r} is not a BERT model")
        config = BertConfig.from_dict(raw, source=str(config_file))
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in shapes else ""
    names = {k: k for k in shapes}
    for new, old in _LEGACY.items():
        names.update({k.replace(old, new): k for k in shapes if k.endswith(old)})
    if "cls.predictions.bias" not in names and "cls.predictions.decoder.bias" in names:
        names["cls.predictions.bias"] = "cls.predictions.decoder.bias"

    def key_of(w: Weight) -> str:
        name = w.hf_name
        return prefix + name[len("bert.") :] if name.startswith("bert.") else name

    params, groups = assemble(
        config,
        source,
        {k: shapes[v] for k, v in names.items()},
        lambda key: read_tensor(names[key]),
        key_of,
        hf_layout=True,
    )
    used = {names[key_of(w)] for w in weights(config) if w.group in groups}
    ignored = sorted(k for k in shapes if k not in used and not k.endswith(_DERIVED))
    return config, params, groups, ignored


def guess_do_lower_case(path: pathlib.Path) -> bool | None:
    try:
        with open(path / "tokenizer_config.json") as f:
            value = json.load(f).get("do_lower_case")
    except (OSError, json.JSONDecodeError):
        return None
    return value if isinstance(value, bool) else None


def export_hf(
    config: BertConfig,
    params: dict,
    output_dir: str | os.PathLike,
    vocab_file: str | os.PathLike | None = None,
    do_lower_case: bool | None = None,
) -> pathlib.Path:
    """Write config.json + model.safetensors (+ vocab.txt) loadable by transformers' BertModel and,
    when both heads are present, BertForPreTraining (BertForMaskedLM with only the MLM head)."""
    from flax.core import meta
    from safetensors.numpy import save_file

    params = unstack_layers(meta.unbox(params))
    params = params.get("params", params)
    groups = present_groups(params, config)
    if "encoder" not in groups:
        raise BertJaxError("export_hf: the parameters hold no complete BERT encoder")
    tensors = {}
    for w in weights(config):
        if w.group not in groups:
            continue
        x = np.asarray(get_path(params, w.path), dtype=np.float32)
        if x.shape != w.our_shape:
            raise BertJaxError(f"export_hf: {'/'.join(w.path)} has shape {x.shape}, "
                               f"config says {w.our_shape}")  # fmt: skip
        x = w.from_ours(x)
        tensors[w.hf_name] = np.ascontiguousarray(x.T if w.hf_transposed else x)
    if {"mlm", "nsp"} <= set(groups):
        arch = "BertForPreTraining"
    elif "mlm" in groups:
        arch = "BertForMaskedLM"
    else:  # the bare encoder is stored without the "bert." prefix, as BertModel saves it
        arch = "BertModel"
        tensors = {k.removeprefix("bert."): v for k, v in tensors.items()}
    hf_config = {**config.to_hf_dict(), "architectures": [arch], "tie_word_embeddings": True}

    out = pathlib.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    # Everything is written under temporary names first, so a failure leaves no partial model.
    with tempfile.TemporaryDirectory(dir=out, prefix=".tmp-export-") as tmp:
        tmp = pathlib.Path(tmp)
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(hf_config, indent=2, sort_keys=True) + "\n")
        if vocab_file is not None:
            shutil.copyfile(vocab_file, tmp / "vocab.txt")
            tok = {
                "tokenizer_class": "BertTokenizer",
                "model_max_length": config.max_position_embeddings,
            }
            if do_lower_case is not None:
                tok["do_lower_case"] = do_lower_case
            (tmp / "tokenizer_config.json").write_text(json.dumps(tok, indent=2) + "\n")
        for f in sorted(tmp.iterdir()):
            os.replace(f, out / f.name)
    return out
