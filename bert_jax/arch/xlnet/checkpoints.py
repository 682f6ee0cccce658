"""Hugging Face XLNet directories (config.json + model.safetensors) in and out.

`XLNetLMHeadModel` saves its encoder under `transformer.` plus `lm_loss.bias` (its `lm_loss.weight`
is the tied word embedding); `XLNetModel` saves the encoder's names bare. Both read into the tree
of `bert_jax.arch.xlnet.XLNetLM` ({"transformer": ..., "lm_loss_bias": ...}); a bare encoder
gets a zero output bias and `has_lm_head=False`. Every tensor keeps HF's shape except the
feed-forward kernels (torch Linear stores [out, in]) and `mask_emb` ([1, 1, D] -> [D]).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
from etils import epath

from bert_jax.arch.bert.hf import _open_weights
from bert_jax.arch.bert.task_heads import TaskHead
from bert_jax.arch.xlnet.config import XLNetConfig
from bert_jax.atomic_write import read_json_object, write_bytes_atomic, write_json_atomic
from bert_jax.checkpoint import read_workdir_config
from bert_jax.errors import BertJaxError
from bert_jax.interop.workdir_params import restore_workdir_params
from bert_jax.task_family_key import saved_task_family

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


def _read_xlnet_workdir(path: epath.Path, **runtime) -> tuple[XLNetConfig, dict, bool]:
    """A fine-tuning workdir's XLNet (its config.json holds the model under "xlnet"): the
    encoder and the task head, no LM head."""
    record = read_workdir_config(path)
    cfg = XLNetConfig.from_hf(record["xlnet"], str(path / "config.json"), **runtime)
    params = restore_workdir_params(path)
    if "transformer" not in params:
        raise BertJaxError(f"{path}: the checkpoint holds no XLNet encoder (transformer)")
    params["lm_loss_bias"] = np.zeros((cfg.vocab_size,), np.float32)
    return cfg, params, False


def read_xlnet_dir(path: str | os.PathLike, **runtime) -> tuple[XLNetConfig, dict, bool]:
    """(config, XLNetLM params, has_lm_head) from an HF XLNetModel / XLNetLMHeadModel directory;
    a task class's directory (XLNetForSequenceClassification, XLNetForQuestionAnsweringSimple)
    also gives its head's parameters (`HEADS`), for `bert_jax.arch.xlnet.heads`. A bert-jax
    workdir fine-tuned from XLNet reads the same way."""
    path = epath.Path(path)
    if (path / "checkpoints").is_dir():
        return _read_xlnet_workdir(path, **runtime)
    config_file = path / "config.json"
    raw = read_json_object(config_file, f"{path}: no config.json next to the safetensors weights")
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
    tokenizer_file: str | os.PathLike | None = None,
    with_lm_head: bool = True,
    task: TaskHead | None = None,
) -> epath.Path:
    """Write config.json + model.safetensors that transformers' XLNetLMHeadModel (or, without the
    head, XLNetModel; with `task`, its XLNetFor<Task> class) loads; the tokenizer
    (`tokenizer_file`: spiece.model or tokenizer.json) is copied beside them."""
    from flax.core import meta
    from safetensors.numpy import save

    from bert_jax.tokenization.directory import TOKENIZER_CONFIG, tokenizer_file_set

    params = meta.unbox(params)
    params = params.get("params", params)
    encoder = params.get("transformer", params)
    prefix = "transformer." if with_lm_head or task is not None else ""
    tensors = {}
    for name, ours, kind in _names(cfg):
        x = _get(encoder, ours)
        x = x.T if kind == "linear" else x.reshape(1, 1, -1) if kind == "mask_emb" else x
        tensors[prefix + name] = np.ascontiguousarray(x)
    hf = cfg.to_hf()
    if task is not None:
        tensors.update(task.tensors)
        hf.update(task.config, architectures=[task.arch])
    elif with_lm_head:
        tensors["lm_loss.bias"] = _get(params, ("lm_loss_bias",))
        tensors["lm_loss.weight"] = tensors["transformer.word_embedding.weight"]
    else:
        hf["architectures"] = ["XLNetModel"]
    out = epath.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(out / "model.safetensors", save(tensors, metadata={"format": "pt"}))
    if tokenizer_file is not None:
        files = tokenizer_file_set(tokenizer_file)
        for name, src in files.items():
            write_bytes_atomic(out / name, src.read_bytes())
        if TOKENIZER_CONFIG not in files:
            write_json_atomic(out / TOKENIZER_CONFIG, {"tokenizer_class": "XLNetTokenizer"})
    write_json_atomic(out / "config.json", hf)  # last: a directory that has it is complete
    return out


# Fine-tuning task family -> (transformers class, HEADS entries it holds).
_TASK_CLASSES = {
    "glue": ("XLNetForSequenceClassification", ("sequence_summary.summary", "logits_proj")),
    "ner": ("XLNetForTokenClassification", ("classifier",)),
    "squad": ("XLNetForQuestionAnsweringSimple", ("qa_outputs",)),
}


def xlnet_task_head(
    run: dict, params: dict, source: str, labels: tuple[str, ...] = (), problem_type=None
) -> TaskHead | None:
    """The head of a fine-tuned XLNet workdir (`run`: its config.json) as transformers' class
    (None: not a fine-tuning run); `labels` name the outputs (id2label)."""
    family = saved_task_family(run)
    if family is None:
        return None
    if family not in _TASK_CLASSES:
        raise BertJaxError(f"{source}: an XLNet {family} head has no transformers class here "
                           f"(exported: {', '.join(_TASK_CLASSES)})")  # fmt: skip
    arch, names = _TASK_CLASSES[family]
    tensors = {}
    for hf_name in names:
        layer = params.get(HEADS[hf_name][0])
        if not isinstance(layer, dict) or "kernel" not in layer:
            raise BertJaxError(f"{source}: the checkpoint has no {HEADS[hf_name][0]} layer")
        tensors[f"{hf_name}.weight"] = np.ascontiguousarray(np.asarray(layer["kernel"]).T)
        tensors[f"{hf_name}.bias"] = np.asarray(layer["bias"], np.float32)
    extra: dict = {}
    if labels:
        extra = {"num_labels": len(labels),
                 "id2label": {str(i): label for i, label in enumerate(labels)},
                 "label2id": {label: i for i, label in enumerate(labels)}}  # fmt: skip
        if problem_type:
            extra["problem_type"] = problem_type
    return TaskHead(arch, tensors, extra, uses_pooler=False)


def convert_xlnet(model_dir: str | os.PathLike, output_dir: str | os.PathLike, task_of=None) -> str:
    """`bert-jax convert` of an XLNet directory or fine-tuned workdir: read into our tree and
    written back (encoder; the LM head if present, else the task head `task_of(run, params)`
    gives for a workdir; the tokenizer)."""
    from bert_jax.tokenization.directory import tokenizer_file_in

    model_dir = epath.Path(model_dir)
    cfg, params, has_head = read_xlnet_dir(model_dir)
    task = None
    if (model_dir / "checkpoints").is_dir() and task_of is not None:
        task = task_of(read_workdir_config(model_dir), params)
    tokenizer = tokenizer_file_in(model_dir)
    out = export_xlnet(cfg, params, output_dir, tokenizer, has_head, task)
    arch = task.arch if task else "XLNetLMHeadModel" if has_head else "XLNetModel"
    return (
        f"wrote {out} ({arch}, n_layer={cfg.n_layer} d_model={cfg.d_model}; tokenizer: "
        f"{tokenizer.name if tokenizer else 'none'})"
    )
