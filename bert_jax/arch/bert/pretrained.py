"""`load_pretrained`: one entry point for Hugging Face dirs, Google TF checkpoints and our workdirs,
and `graft_encoder`, which puts pretrained weights into a freshly initialised task model."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import numpy as np
from etils import epath
from flax.core import meta

from bert_jax.arch.bert import hf, tf_ckpt
from bert_jax.arch.bert import tf_variants as tf_families
from bert_jax.arch.bert.names import present_groups
from bert_jax.checkpoint import restore_params
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.model.scan import stack_layers, unstack_layers
from bert_jax.tokenization.directory import tokenizer_file_in


@dataclasses.dataclass(frozen=True)
class Pretrained:
    """Weights ready for `BertForPreTraining(config).apply({"params": params}, ...)`.

    `params` is unboxed, in the looped layout (`encoder/layer_i`; `stack_layers` for scan_layers),
    and holds `bert` plus whichever heads the checkpoint had: `heads` is a subset of
    ("pooler", "mlm", "nsp", "rtd"). Without "nsp" use `BertForPreTraining(config, use_nsp=False)`;
    with "rtd" (an ELECTRA discriminator) `BertForReplacedTokenDetection(config)`; with only the
    pooler (a bare base model) apply `BertModel` to `params["bert"]`. `config.family` says which
    of the BERT family it is.
    """

    config: BertConfig
    params: dict
    heads: tuple[str, ...]
    # vocab.txt, vocab.json (byte BPE), spiece.model or tokenizer.json (`tokenization.directory`)
    vocab_file: epath.Path | None = None
    do_lower_case: bool | None = None
    source: str = ""
    ignored: tuple[str, ...] = ()  # checkpoint variables that are not BERT weights (e.g. a head)


def _tf_prefix_in(directory: epath.Path) -> epath.Path | None:
    """The TF checkpoint in a release directory: bert_model.ckpt (BERT), else the one named by a
    `checkpoint` state file, else the only `*.index` (ALBERT's model.ckpt-best, ELECTRA's
    electra_small)."""
    if tf_ckpt.is_tf_checkpoint(directory / "bert_model.ckpt"):
        return directory / "bert_model.ckpt"
    state = directory / "checkpoint"
    if state.exists():
        for line in state.read_text().splitlines():
            if line.startswith("model_checkpoint_path:"):
                named = directory / epath.Path(line.split(":", 1)[1].strip().strip('"')).name
                if tf_ckpt.is_tf_checkpoint(named):
                    return named
    indexes = [p for p in directory.glob("*.index") if p.is_file()]
    if len(indexes) == 1:
        return directory / indexes[0].name[: -len(".index")]
    return None


def _existing(path: epath.Path | None) -> epath.Path | None:
    return path if path is not None and path.exists() else None


def load_pretrained(
    path: str | os.PathLike,
    bert_config_file: str | os.PathLike | None = None,
    vocab_file: str | os.PathLike | None = None,
    step: int | None = None,
) -> Pretrained:
    """Load a Hugging Face directory, a TF checkpoint prefix (or the directory holding
    bert_model.ckpt.*), or a bert-jax workdir (a directory with `checkpoints/`; its latest
    checkpoint, or that of `step`). Paths are local or anything etils.epath opens (gs://)."""
    path = epath.Path(path)
    vocab = epath.Path(vocab_file) if vocab_file else None
    if vocab is not None and not vocab.exists():
        raise BertJaxError(f"{vocab}: no such vocab file")
    if path.is_dir() and (path / "checkpoints").is_dir():
        return _load_workdir(path, vocab, step)
    if step is not None:
        raise BertJaxError(f"{path}: a checkpoint step ({step}) needs a bert-jax workdir")
    tf_prefix = _tf_prefix_in(path) if path.is_dir() else None
    if path.is_dir() and tf_prefix is None:
        override = BertConfig.from_json_file(bert_config_file) if bert_config_file else None
        config, params, groups, ignored = hf.read_hf_dir(path, override)
        return Pretrained(
            config=config,
            params=params,
            heads=tuple(g for g in groups if g != "encoder"),
            vocab_file=vocab or tokenizer_file_in(path),
            do_lower_case=hf.guess_do_lower_case(path),
            source=str(path),
            ignored=tuple(ignored),
        )
    prefix = tf_prefix or path
    if not tf_ckpt.is_tf_checkpoint(prefix):
        raise BertJaxError(
            f"{path}: not found as a Hugging Face dir, a TF checkpoint prefix "
            f"(expected {path}.index) or a bert-jax workdir"
        )
    checkpoint = tf_ckpt.open_checkpoint(prefix)  # the family is told by its variable names
    family = tf_families.detect_family(checkpoint.shapes)
    config_file = bert_config_file or tf_families.config_file_in(prefix.parent, family)
    config = tf_families.read_tf_config(epath.Path(config_file), family)
    params, groups, ignored = tf_ckpt.read_tf_checkpoint(checkpoint, config)
    return Pretrained(
        config=config,
        params=params,
        heads=tuple(g for g in groups if g != "encoder"),
        vocab_file=vocab or _existing(prefix.parent / "vocab.txt"),
        do_lower_case=tf_ckpt.guess_do_lower_case(prefix),
        source=str(prefix),
        ignored=tuple(ignored),
    )


def _load_workdir(path: epath.Path, vocab: epath.Path | None, step: int | None) -> Pretrained:
    config, params = restore_params(path, step)
    params = unstack_layers(meta.unbox(params))
    params = params.get("params", params)
    params = jax.tree.map(lambda x: np.asarray(x, np.float32), params)
    groups = present_groups(params, config)
    if "encoder" not in groups:
        raise BertJaxError(f"{path}: the checkpoint holds no complete BERT encoder")
    return Pretrained(
        config=config,
        params=params,
        heads=tuple(g for g in groups if g != "encoder"),
        vocab_file=vocab or tokenizer_file_in(path),
        source=str(path),
    )


# ---- grafting into task models -----------------------------------------------------------------


def graft_encoder(task_params: Any, pretrained_params: dict, encoder_scope: str = "bert") -> Any:
    """Copy the pretrained `bert` subtree (XLNet: `transformer`), and `predictions` /
    `seq_relationship` where the task model has them, into a task model's freshly initialised
    params, keeping everything else (e.g. a classifier, or the pooler when the checkpoint has
    none). Works for boxed or unboxed,
    looped or scanned task params, with or without the outer {"params": ...}; returns the same
    structure. Every copied array must have the task's shape. An architecture whose encoder has
    another scope (`families.*.encoder_scope`: XLNet's `transformer`, ModernBERT's `model`) gets
    that subtree copied as it is (those are never scanned in fine-tuning)."""
    wrapped = isinstance(task_params, dict) and set(task_params) == {"params"}
    inner = task_params["params"] if wrapped else task_params
    source = meta.unbox(pretrained_params)
    source = source.get("params", source)
    for scope in {encoder_scope, "transformer"} - {"bert"}:  # XLNet's scope, named or not
        if scope in inner and scope in source:
            grafted = dict(inner)
            grafted[scope] = _copy_into(inner[scope], source[scope], scope)
            return {"params": grafted} if wrapped else grafted
    if "bert" not in inner:
        raise BertJaxError("graft_encoder: the task model has no `bert` submodule")
    task_unboxed = meta.unbox(inner)
    scanned = "layers" in task_unboxed["bert"].get("encoder", {})
    source = stack_layers(source) if scanned else unstack_layers(source)
    grafted = dict(inner)
    for name in ("bert", "predictions", "seq_relationship"):
        if name in inner and name in source:
            grafted[name] = _copy_into(inner[name], source[name], name)
    return {"params": grafted} if wrapped else grafted


def _copy_into(target: Any, source: Any, path: str) -> Any:
    if isinstance(target, meta.AxisMetadata):
        value = _copy_into(target.unbox(), source, path)
        return target.replace_boxed(value)
    if isinstance(target, dict):
        if not isinstance(source, dict):
            raise BertJaxError(
                f"graft_encoder: {path} is an array in the checkpoint, a subtree here"
            )
        missing = [k for k in target if k not in source and k != "pooler"]
        if missing:
            raise BertJaxError(f"graft_encoder: the checkpoint has no {path}/{missing[0]}")
        return {
            k: _copy_into(v, source[k], f"{path}/{k}") if k in source else v
            for k, v in target.items()
        }
    value = np.asarray(source)
    if tuple(value.shape) != tuple(target.shape):
        raise BertJaxError(
            f"graft_encoder: {path} has shape {tuple(value.shape)} in the checkpoint, "
            f"{tuple(target.shape)} in the task model"
        )
    return np.asarray(value, dtype=target.dtype)  # on the host: the trainer places the shards
