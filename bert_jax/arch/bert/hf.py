"""Hugging Face BERT directories (config.json + model.safetensors) in and out, never unpickling."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable

import numpy as np
from etils import epath

from bert_jax.arch.bert import hf_configs
from bert_jax.arch.bert.assemble import assemble
from bert_jax.arch.bert.names import (
    HF_BUFFERS,
    Weight,
    get_path,
    hf_family,
    present_groups,
    weights,
)
from bert_jax.arch.bert.task_heads import TaskHead
from bert_jax.arch.bert.variants import get_variant
from bert_jax.atomic_write import (
    is_local,
    read_json_object,
    write_bytes_atomic,
    write_json_atomic,
)
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.model.scan import unstack_layers

# Old PyTorch-ported checkpoints used TF's LayerNorm names; both spellings are accepted.
_LEGACY = {".LayerNorm.weight": ".LayerNorm.gamma", ".LayerNorm.bias": ".LayerNorm.beta"}


def _safe_open(path: epath.Path):
    """safetensors memory-maps a local file; a gs:// one is first copied to a local temporary
    file, which is unlinked at once (the mapping keeps its pages)."""
    from safetensors import safe_open

    if is_local(path):
        return safe_open(str(path), framework="flax")
    with tempfile.NamedTemporaryFile(suffix=".safetensors") as tmp:
        tmp.write(path.read_bytes())
        tmp.flush()
        return safe_open(tmp.name, framework="flax")


def _open_weights(path: epath.Path) -> tuple[str, dict[str, tuple[int, ...]], Callable]:
    """(name for messages, key -> shape, key -> array) over model.safetensors or its shards."""
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
            handles[name] = handle = _safe_open(path / name)
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
    path: epath.Path, config: BertConfig | None = None
) -> tuple[BertConfig, dict, tuple[str, ...], list[str]]:
    """(config, params, groups present, ignored keys) from a Hugging Face directory of a BERT-family
    model (its variant's `hf_names`); `config` overrides its config.json."""
    source, shapes, read_tensor = _open_weights(path)
    config_file = path / "config.json"
    if config is None:
        raw = read_json_object(
            config_file, f"{path}: no config.json next to the safetensors weights"
        )
        config = hf_configs.config_from_hf(raw, str(config_file))
    naming = hf_family(config.family)
    base = naming.prefix + "."  # a bare base model (BertModel, ...) saves its names without it
    prefix = base if f"{base}embeddings.word_embeddings.weight" in shapes else ""
    names = {k: k for k in shapes}
    for new, old in _LEGACY.items():
        names.update({k.replace(old, new): k for k in shapes if k.endswith(old)})
    for name, alias in naming.aliases:  # the tied decoder's copy of the MLM bias
        if name not in names and alias in names:
            names[name] = alias

    def key_of(w: Weight) -> str:
        name = w.hf_name
        return prefix + name[len(base) :] if name.startswith(base) else name

    params, groups = assemble(
        config,
        source,
        {k: shapes[v] for k, v in names.items()},
        lambda key: read_tensor(names[key]),
        key_of,
        hf_layout=True,
    )
    used = {names[key_of(w)] for w in weights(config) if w.group in groups}
    derived = (*HF_BUFFERS, *naming.tied)  # carry no weights of their own
    ignored = sorted(k for k in shapes if k not in used and not k.endswith(derived))
    return config, params, groups, ignored


def guess_do_lower_case(path: epath.Path) -> bool | None:
    try:
        value = json.loads((path / "tokenizer_config.json").read_text()).get("do_lower_case")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, bool) else None


def write_tokenizer_files(
    vocab_file: epath.Path, out: epath.Path, config: BertConfig, do_lower_case: bool | None
) -> None:
    """The tokenizer beside an export, with the tokenizer_config.json that makes AutoTokenizer
    load it: a vocab.txt as BertTokenizer's, a byte-level BPE as RoBERTa's, a spiece.model or a
    tokenizer.json with the tokenizer_config.json it came with (else its family's class)."""
    from bert_jax.tokenization.directory import TOKENIZER_CONFIG, tokenizer_file_set, tokenizer_kind

    kind = tokenizer_kind(vocab_file)
    files = tokenizer_file_set(vocab_file)
    for name, src in files.items():
        write_bytes_atomic(out / name, src.read_bytes())
    if TOKENIZER_CONFIG in files:
        return
    cls = {"wordpiece": "BertTokenizer", "byte_bpe": "RobertaTokenizer"}.get(kind)
    tok = {
        "tokenizer_class": cls or get_variant(config.family).tokenizer_class,
        "model_max_length": config.max_sequence_length,
    }
    if do_lower_case is not None and kind != "byte_bpe":
        tok["do_lower_case"] = do_lower_case
    write_json_atomic(out / TOKENIZER_CONFIG, tok)


def export_hf(
    config: BertConfig,
    params: dict,
    output_dir: str | os.PathLike,
    vocab_file: str | os.PathLike | None = None,
    do_lower_case: bool | None = None,
    task: TaskHead | None = None,
) -> epath.Path:
    """Write config.json + model.safetensors (+ vocab.txt) loadable by transformers' class for
    `config.family` and the heads present (the variant's `architectures`: e.g. BertForPreTraining
    with MLM and NSP, BertForMaskedLM with only MLM, BertModel with neither), or with `task` (a
    fine-tuned model's head, `task_heads.task_head`) by its *For<Task> class."""
    from flax.core import meta
    from safetensors.numpy import save

    params = unstack_layers(meta.unbox(params))
    params = params.get("params", params)
    groups = present_groups(params, config)
    if "encoder" not in groups:
        raise BertJaxError("export_hf: the parameters hold no complete BERT encoder")
    if task is None:
        arch, holds = hf_configs.architecture(config, groups)
    else:  # the task class holds the encoder, the pooler if its head reads it, and the head
        hf_configs.architecture(config, ("encoder",))  # checks transformers can hold the config
        arch, holds = task.arch, frozenset({"pooler"} if task.uses_pooler else ())
        if task.uses_pooler and "pooler" not in groups:
            raise BertJaxError(f"export_hf: {arch} reads the pooler; the checkpoint has none")
    tensors = {}
    for w in weights(config):
        if w.group not in groups or w.group not in {"encoder", *holds}:
            continue
        x = np.asarray(get_path(params, w.path), dtype=np.float32)
        if x.shape != w.our_shape:
            raise BertJaxError(f"export_hf: {'/'.join(w.path)} has shape {x.shape}, "
                               f"config says {w.our_shape}")  # fmt: skip
        x = w.from_ours(x)
        tensors[w.hf_name] = np.ascontiguousarray(x.T if w.hf_transposed else x)
    # The bare encoder is stored without the prefix, as transformers saves it (BertLMHeadModel
    # also ends in "Model" but keeps it).
    if arch == hf_configs.base_class(config):
        base = hf_family(config.family).prefix + "."
        tensors = {k.removeprefix(base): v for k, v in tensors.items()}
    hf_config = hf_configs.hf_config(config, arch)
    if task is not None:
        tensors.update(task.tensors)
        hf_config.update(task.config)

    out = epath.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    # Each file is written whole or not at all, config.json last: a directory that has it is
    # complete (local or gs://).
    write_bytes_atomic(out / "model.safetensors", save(tensors, metadata={"format": "pt"}))
    if vocab_file is not None:
        write_tokenizer_files(epath.Path(vocab_file), out, config, do_lower_case)
    write_json_atomic(out / "config.json", hf_config, sort_keys=True)
    return out
