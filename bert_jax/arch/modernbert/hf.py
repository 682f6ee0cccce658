"""Hugging Face ModernBERT directories <-> our ModernBERT parameters.

    config, params, architecture = load_hf_dir("modernbert-dir/")
    export_hf_dir(params, config, "out/", "ModernBertForMaskedLM", tokenizer_file)

Names are transformers' (`model.layers.3.attn.Wqkv.weight` <-> `model/layer_3/attn/Wqkv/kernel`);
Linear weights are transposed and the fused projections reshaped to (in, 3, heads, head_dim) and
(heads, head_dim, out). The masked-LM decoder is tied to the token embeddings (only its bias is
stored). A directory is written as one set (`bert_jax.file_set`): a failed export leaves the
previous one or nothing, never a half-written directory.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import numpy as np
from etils import epath
from flax.core import meta

from bert_jax import file_set
from bert_jax.arch import modernbert as mb
from bert_jax.errors import BertJaxError

# Each transformers class -> our module, built as `build(config, num_labels)` (the label count
# matters to the classifiers only).
ARCHITECTURES = {
    "ModernBertModel": lambda c, n=2: mb.ModernBertModel(c),
    "ModernBertForMaskedLM": lambda c, n=2: mb.ModernBertForMaskedLM(c),
    "ModernBertForSequenceClassification": mb.ModernBertForSequenceClassification,
    "ModernBertForTokenClassification": mb.ModernBertForTokenClassification,
    "ModernBertForQuestionAnswering": lambda c, n=2: mb.ModernBertForQuestionAnswering(c),
    "ModernBertForMultipleChoice": lambda c, n=2: mb.ModernBertForMultipleChoice(c),
}
SAFETENSORS = "model.safetensors"


def _hf_name(path: tuple[str, ...]) -> str:
    """Our parameter path (unscanned) -> transformers' state-dict key."""
    *scopes, leaf = path
    names = [f"layers.{s[len('layer_') :]}" if s.startswith("layer_") else s for s in scopes]
    if leaf == "decoder_bias":
        return "decoder.bias"
    suffix = {"kernel": "weight", "embedding": "weight", "scale": "weight", "bias": "bias"}[leaf]
    return ".".join([*names, suffix])


def _to_hf(path: tuple[str, ...], value: np.ndarray, hidden: int) -> np.ndarray:
    if path[-1] != "kernel":
        return value.reshape(-1) if path[-1] == "bias" else value
    if path[-2] == "Wqkv":
        return value.reshape(hidden, -1).T
    if path[-2] == "Wo" and path[-3] == "attn":
        return value.reshape(-1, hidden).T
    return value.T


def _from_hf(path: tuple[str, ...], value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    value = value.T if path[-1] == "kernel" else value
    return value.reshape(shape)


def _paths(tree: Any) -> list[tuple[tuple[str, ...], Any]]:
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    return [(tuple(str(getattr(k, "key", k)) for k in path), leaf) for path, leaf in flat]


def unscan(params: Any, config: mb.ModernBertConfig) -> Any:
    """The scanned layout's `layers` (layers 1..N-1 stacked) as layer_1, layer_2, ..."""
    params = meta.unbox(params)
    out = dict(params)
    for scope, tree in params.items():
        if isinstance(tree, dict) and "layers" in tree:
            inner = dict(tree)
            stacked = inner.pop("layers")
            for i in range(1, config.num_hidden_layers):
                inner[f"layer_{i}"] = jax.tree_util.tree_map(lambda a, i=i: a[i - 1], stacked)
            out[scope] = inner
    return out


def hf_state_dict(params: Any, config: mb.ModernBertConfig) -> dict[str, np.ndarray]:
    """transformers' state dict of a head's parameters (the decoder weight is tied: omitted)."""
    tree = unscan(jax.device_get(params), config)
    return {
        _hf_name(p): np.ascontiguousarray(_to_hf(p, np.asarray(v, np.float32), config.hidden_size))
        for p, v in _paths(tree)
    }


def params_from_state_dict(
    state: dict[str, np.ndarray], config: mb.ModernBertConfig, architecture: str,
    source: str = "state dict", num_labels: int = 2,
) -> Any:  # fmt: skip
    """Our (unscanned) parameters of `architecture` from a transformers state dict."""
    template = _template(config.replace(scan_layers=False), architecture, num_labels)
    leaves = []
    for path, shape in _paths(template):
        name = _hf_name(path)
        if name not in state:
            raise BertJaxError(f"{source}: has no tensor {name} (needed by {architecture})")
        value = np.asarray(state[name], np.float32)
        expected = _to_hf(path, np.zeros(shape.shape, np.float32), config.hidden_size).shape
        if value.shape != expected:
            raise BertJaxError(f"{source}: {name} has shape {value.shape}, expected {expected}")
        leaves.append(_from_hf(path, value, shape.shape))
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(template), leaves)


def _template(config: mb.ModernBertConfig, architecture: str, num_labels: int) -> Any:
    if architecture not in ARCHITECTURES:
        raise BertJaxError(f"architecture {architecture!r}: use one of {', '.join(ARCHITECTURES)}")
    model = ARCHITECTURES[architecture](config, num_labels)
    ids = np.zeros((1, 1, 4) if architecture.endswith("MultipleChoice") else (1, 4), np.int32)
    kw = {"input_ids_BxCxL": ids} if ids.ndim == 3 else {}
    args = () if kw else (ids,)
    shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), *args, **kw))["params"]
    shapes = meta.unbox(shapes)
    return {"model": shapes} if architecture == "ModernBertModel" else shapes


def load_hf_dir(path: str | os.PathLike, **runtime: Any) -> tuple[mb.ModernBertConfig, Any, str]:
    """(config, parameters, architecture) of a Hugging Face ModernBERT directory; the encoder's
    parameters are under "model" for every architecture."""
    from safetensors.numpy import load as load_safetensors

    d = epath.Path(path)
    config_file, weights = d / "config.json", d / SAFETENSORS
    for f in (config_file, weights):
        if not f.exists():
            raise BertJaxError(f"{f}: no such file (a Hugging Face ModernBERT directory)")
    try:
        raw = json.loads(config_file.read_text())
    except ValueError as e:
        raise BertJaxError(f"{config_file}: not JSON ({e})") from None
    config = mb.ModernBertConfig.from_hf_dict(raw, str(config_file), **runtime)
    architecture = (raw.get("architectures") or ["ModernBertModel"])[0]
    try:
        state = load_safetensors(weights.read_bytes())
    except Exception as e:  # safetensors raises its own error types on a damaged file
        raise BertJaxError(f"{weights}: unreadable safetensors file ({e})") from None
    if architecture == "ModernBertModel" and not any(k.startswith("model.") for k in state):
        state = {f"model.{k}": v for k, v in state.items()}  # a bare model saves without prefix
    labels = len(raw.get("id2label") or {}) or 2
    params = params_from_state_dict(state, config, architecture, str(weights), labels)
    return config, params, architecture


def export_hf_dir(
    params: Any, config: mb.ModernBertConfig, out_dir: str | os.PathLike, architecture: str,
    tokenizer_files: dict[str, epath.Path] | None = None, extra_config: dict | None = None,
) -> epath.Path:  # fmt: skip
    """Write config.json, model.safetensors (and the tokenizer's files) as one set."""
    from safetensors.numpy import save as save_safetensors

    if architecture not in ARCHITECTURES:
        raise BertJaxError(f"architecture {architecture!r}: use one of {', '.join(ARCHITECTURES)}")
    state = hf_state_dict(params, config)
    if architecture == "ModernBertModel":
        state = {k.removeprefix("model."): v for k, v in state.items()}
    hf_config = config.to_hf_dict() | {"architectures": [architecture]} | (extra_config or {})
    if "Classification" in architecture:  # transformers sizes the classifier from id2label
        labels = state["classifier.bias"].shape[0]
        hf_config.setdefault("id2label", {i: f"LABEL_{i}" for i in range(labels)})
        if len(hf_config["id2label"]) != labels:
            raise BertJaxError(
                f"{out_dir}: id2label has {len(hf_config['id2label'])} labels, the classifier "
                f"{labels}"
            )
    files = {
        "config.json": (json.dumps(hf_config, indent=2) + "\n").encode(),
        SAFETENSORS: save_safetensors(state, metadata={"format": "pt"}),
    }
    for name, src in (tokenizer_files or {}).items():
        files[name] = epath.Path(src).read_bytes()
    if "tokenizer.json" in files and "tokenizer_config.json" not in files:
        files["tokenizer_config.json"] = _tokenizer_config(files["tokenizer.json"])
    epath.Path(out_dir).mkdir(parents=True, exist_ok=True)
    file_set.publish(out_dir, files)
    return epath.Path(out_dir)


def _tokenizer_config(tokenizer_json: bytes) -> bytes:
    """transformers' tokenizer_config.json for a tokenizer.json with BERT-style special tokens
    (what ModernBERT's release ships), so that AutoTokenizer knows [CLS], [SEP], [PAD]..."""
    vocab = json.loads(tokenizer_json).get("added_tokens") or []
    present = {t.get("content") for t in vocab}
    roles = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]",
             "unk_token": "[UNK]", "mask_token": "[MASK]"}  # fmt: skip
    config = {"tokenizer_class": "PreTrainedTokenizerFast",
              "model_input_names": ["input_ids", "attention_mask"]}  # fmt: skip
    config.update({role: token for role, token in roles.items() if token in present})
    return (json.dumps(config, indent=2) + "\n").encode()


def export_pretraining_run(
    config: mb.ModernBertConfig, params: Any, out_dir: str | os.PathLike, vocab: Any
) -> epath.Path:
    """A pretraining run's ModernBertPretraining weights as ModernBertForMaskedLM, with the
    special-token ids of its vocabulary."""
    from bert_jax.tokenization.directory import open_tokenizer, tokenizer_file_set
    from bert_jax.tokenization.layout import layout_of

    inner = meta.unbox(jax.device_get(params))["mlm"]
    tokenizer = None
    if vocab:
        tokenizer = tokenizer_file_set(vocab)
        tok = open_tokenizer(vocab, None, "do_lower_case")
        layout = layout_of(tok)
        config = config.replace(
            pad_token_id=layout.pad_id(tok.vocab),
            cls_token_id=tok.vocab[layout.cls],
            sep_token_id=tok.vocab[layout.sep],
        )
    return export_hf_dir(inner, config, out_dir, "ModernBertForMaskedLM", tokenizer)


# transformers' class of a fine-tuning run's head, by its task family.
TASK_ARCHITECTURES = {
    "glue": "ModernBertForSequenceClassification",
    "ner": "ModernBertForTokenClassification",
    "squad": "ModernBertForQuestionAnswering",
    "swag": "ModernBertForMultipleChoice",
}


def convert(path: str | os.PathLike, out_dir: str | os.PathLike, labels_of=None) -> str:
    """`bert-jax convert` of a ModernBERT directory, or of a workdir fine-tuned from one (its
    head as ModernBertFor<Task>; `labels_of(run)` gives (label names, problem_type))."""
    from bert_jax.checkpoint import read_workdir_config
    from bert_jax.interop.workdir_params import restore_workdir_params
    from bert_jax.task_family_key import saved_task_family
    from bert_jax.tokenization.directory import tokenizer_file_in, tokenizer_file_set

    d = epath.Path(path)
    tokenizer = tokenizer_file_in(d)
    files = tokenizer_file_set(tokenizer) if tokenizer else None
    extra: dict = {}
    if (d / "checkpoints").is_dir():
        run = read_workdir_config(d)
        if "modernbert" not in run:
            raise BertJaxError(f"{d / 'config.json'}: holds no modernbert model entry")
        config = mb.ModernBertConfig.from_hf_dict(run["modernbert"], str(d / "config.json"))
        params = restore_workdir_params(d)
        params.pop("teacher", None)  # an online distillation's frozen teacher, not the model
        family = saved_task_family(run)
        if family not in TASK_ARCHITECTURES:
            raise BertJaxError(f"{d}: a ModernBERT {family} run has no transformers class here")
        architecture = TASK_ARCHITECTURES[family]
        labels, problem_type = labels_of(run) if labels_of else ((), None)
        if labels:
            extra = {"id2label": dict(enumerate(labels)),
                     "label2id": {name: i for i, name in enumerate(labels)}}  # fmt: skip
        if problem_type:
            extra["problem_type"] = problem_type
    else:
        config, params, architecture = load_hf_dir(d)
    out = export_hf_dir(params, config, out_dir, architecture, files, extra)
    return (
        f"wrote {out} ({architecture}, L={config.num_hidden_layers} H={config.hidden_size}; "
        f"tokenizer: {tokenizer.name if tokenizer else 'none'})"
    )
