"""Google's original TF checkpoints (bert_model.ckpt.index/.data-*) with the reference names, and
the ALBERT and ELECTRA releases with theirs (`tf_families`).

TensorFlow is imported only here, and only to read the checkpoint (`tf.train.load_checkpoint`).
Optimizer slots (`adam_m`, `adam_v`) and `global_step` are skipped.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from typing import Any

from etils import epath

from bert_jax.arch.bert.assemble import assemble
from bert_jax.arch.bert.names import weights
from bert_jax.arch.bert.tf_variants import tf_name
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError

_SKIP = re.compile(r"(/adam_[mv]$|^global_step$|^bad_steps$|^good_steps$|^loss_scale$)")
# The reference's validate_case_matches_checkpoint: Google's release directory names.
_CASED_DIR = re.compile(r"(^|[^n])cased_L-\d+_H-\d+_A-\d+|multi_cased")
_UNCASED_DIR = re.compile(r"uncased_L-\d+_H-\d+_A-\d+|multilingual_L-12|chinese_L-12")


def is_tf_checkpoint(prefix: pathlib.Path) -> bool:
    return epath.Path(f"{prefix}.index").exists()


def guess_do_lower_case(prefix: pathlib.Path) -> bool | None:
    # resolve() would turn gs://b/x into a local path; only a relative local prefix needs it.
    name = (prefix if "://" in str(prefix) else pathlib.Path(prefix).resolve()).parent.name
    if _UNCASED_DIR.search(name):
        return True
    if _CASED_DIR.search(name):
        return False
    return None


@dataclasses.dataclass(frozen=True)
class TfCheckpoint:
    """An opened checkpoint: its reader and every variable's shape (read once, from the index)."""

    prefix: pathlib.Path
    reader: Any
    shapes: dict[str, tuple[int, ...]]


def open_checkpoint(prefix: pathlib.Path) -> TfCheckpoint:
    try:
        import tensorflow as tf
    except ImportError:
        raise BertJaxError(
            f"{prefix}: reading TF checkpoints needs TensorFlow (pip install tensorflow-cpu)"
        ) from None
    try:
        reader = tf.train.load_checkpoint(str(prefix))
        shapes = {k: tuple(v) for k, v in reader.get_variable_to_shape_map().items()}
    except Exception as e:
        raise BertJaxError(
            f"{prefix}: not a readable TF checkpoint ({e})".splitlines()[0]
        ) from None
    return TfCheckpoint(prefix, reader, shapes)


def read_tf_checkpoint(
    checkpoint: TfCheckpoint, config: BertConfig
) -> tuple[dict, tuple[str, ...], list[str]]:
    """(params, groups present, ignored variable names); names as `config.family`'s release."""
    prefix, reader, shapes = checkpoint.prefix, checkpoint.reader, checkpoint.shapes

    def read(name: str):
        try:
            return reader.get_tensor(name)
        except Exception as e:
            raise BertJaxError(f"{prefix}: cannot read {name} ({e})".splitlines()[0]) from None

    family = config.family or "bert"
    key_of = lambda w: tf_name(w.tf_name, family)  # noqa: E731
    params, groups = assemble(config, str(prefix), shapes, read, key_of, hf_layout=False)
    known = {key_of(w) for w in weights(config)}
    ignored = sorted(k for k in shapes if k not in known and not _SKIP.search(k))
    return params, groups, ignored
