"""What `bert-jax convert` needs from a fine-tuned workdir besides its weights: the task head and
the tokenizer the run used (its vocab.txt and lower-casing, found as the fine-tuning runner found
them: `vocab_file`, else the init checkpoint's; `do_lower_case`, else the checkpoint's, else True).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
import os

from etils import epath

from bert_jax.arch import registry
from bert_jax.arch.bert import hf, tf_ckpt
from bert_jax.arch.bert.pretrained import Pretrained
from bert_jax.arch.bert.task_heads import TaskHead, task_head
from bert_jax.atomic_write import is_local, read_json_object
from bert_jax.errors import BertJaxError
from bert_jax.task_family_key import saved_task_family
from bert_jax.tasks import glue, ner
from bert_jax.tokenization.directory import tokenizer_file_in


@dataclasses.dataclass(frozen=True)
class Finetuned:
    head: TaskHead
    vocab_file: epath.Path | None
    do_lower_case: bool


def _init_vocab_and_case(init: str) -> tuple[epath.Path | None, bool | None]:
    """vocab.txt and lower-casing of an init checkpoint (HF dir, workdir or TF prefix)."""
    path = epath.Path(init)
    if path.is_dir() and not tf_ckpt.is_tf_checkpoint(path / "bert_model.ckpt"):
        return tokenizer_file_in(path), hf.guess_do_lower_case(path)
    prefix = path / "bert_model.ckpt" if path.is_dir() else path
    vocab = prefix.parent / "vocab.txt"
    return (vocab if vocab.exists() else None), tf_ckpt.guess_do_lower_case(prefix)


def task_labels(run: dict) -> tuple[tuple[str, ...], str | None]:
    """(label names in the head's output order, transformers' problem_type) of a fine-tuning run."""
    family = saved_task_family(run)
    if family == "glue":
        spec = glue.get_spec(run.get("task", ""))
        if spec.is_regression:
            return ("score",), "regression"
        return tuple(spec.labels), "single_label_classification"
    if family == "ner":
        return tuple(ner.LABELS), None
    return (), None


def finetuned(pre: Pretrained) -> Finetuned | None:
    """The head and tokenizer of `pre` when it was loaded from a fine-tuning workdir, else None."""
    source = epath.Path(pre.source)
    config_file = source / "config.json"
    if not pre.source or not (source / "checkpoints").is_dir() or not config_file.exists():
        return None
    try:
        run = json.loads(config_file.read_text())
    except json.JSONDecodeError as e:
        raise BertJaxError(f"{config_file}: not valid JSON ({e})") from None
    head = task_head(run, pre.params, pre.config, str(source), *task_labels(run))
    if head is None:
        return None
    vocab, lower = pre.vocab_file, run.get("do_lower_case")
    init_vocab, init_lower = (None, None)
    if run.get("init_checkpoint"):
        init_vocab, init_lower = _init_vocab_and_case(run["init_checkpoint"])
    if vocab is None and run.get("vocab_file"):
        vocab = epath.Path(run["vocab_file"])
    vocab = vocab or init_vocab
    if vocab is not None and not vocab.exists():
        raise BertJaxError(f"{vocab}: the run's vocab file is gone; pass --vocab_file")
    if lower is None:
        lower = True if init_lower is None else init_lower
    return Finetuned(head, vocab, bool(lower))


def convert(
    init_checkpoint: str,
    output_dir: str,
    bert_config_file: str | None = None,
    vocab_file: str | None = None,
) -> tuple[epath.Path, Pretrained, TaskHead | None, epath.Path | None]:
    """`bert-jax convert`: any checkpoint -> a Hugging Face dir; a fine-tuning workdir exports as
    its task's class with its tokenizer. Returns (dir, what was loaded, the head, the vocab)."""
    from bert_jax.arch.bert.hf import export_hf
    from bert_jax.arch.bert.pretrained import load_pretrained

    pre = load_pretrained(init_checkpoint, bert_config_file, vocab_file)
    tuned = finetuned(pre)
    vocab, lower = pre.vocab_file, pre.do_lower_case
    if tuned is not None:
        vocab, lower = tuned.vocab_file, tuned.do_lower_case
    task = tuned.head if tuned else None
    out = export_hf(pre.config, pre.params, output_dir, vocab, lower, task=task)
    return out, pre, task, vocab


def _convert_any(
    init_checkpoint: str,
    output_dir: str,
    bert_config_file: str | None = None,
    vocab_file: str | None = None,
) -> list[str]:
    """`convert_any` into `output_dir` as it is (the staging directory)."""
    family = registry.for_checkpoint(init_checkpoint)
    if family and family.converts_own_files:  # XLNet / T5 / ModernBERT: its own files
        for name, value in (("bert_config_file", bert_config_file), ("vocab_file", vocab_file)):
            if value:
                raise BertJaxError(
                    f"--{name}: only for BERT-family checkpoints; {init_checkpoint} is "
                    f"{family.name} (its own files are used)"
                )
        return [family.convert(init_checkpoint, output_dir, task_labels)]
    out, pre, task, vocab = convert(init_checkpoint, output_dir, bert_config_file, vocab_file)
    heads = task.arch if task else ", ".join(pre.heads) or "none"
    lines = [
        f"wrote {out} (L={pre.config.num_hidden_layers} H={pre.config.hidden_size}; heads: {heads}"
        f"; tokenizer: {vocab.name if vocab else 'none, pass --vocab_file'})"
    ]
    if pre.ignored:
        lines.append(f"ignored {len(pre.ignored)} non-BERT variables, e.g. {pre.ignored[0]}")
    return lines


# ---------------------------------------------------------------------------------------------
# The output directory. An export is written into a staging directory inside it, then moved in:
# the files of an earlier export that the new one lacks (another tokenizer's tokenizer.json
# beside a vocab.txt, which AutoTokenizer would prefer) go, and another family's export is only
# replaced when asked.

# What a Hugging Face model directory is made of (our exporters, transformers' save_pretrained).
_MODEL_FILES = (
    "config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
    "model-*-of-*.safetensors", "pytorch_model.bin", "pytorch_model.bin.index.json",
    "pytorch_model-*-of-*.bin", "tf_model.h5", "flax_model.msgpack", "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.txt",
    "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model", "chat_template.jinja",
)  # fmt: skip
_STAGING = ".export-"


def _is_model_file(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in _MODEL_FILES)


def _model_type(config_file: epath.Path) -> str | None:
    """config.json's `model_type` (None: no config.json; "" : one that is no HF model's)."""
    if not config_file.exists():
        return None
    raw = read_json_object(config_file, f"{config_file}: not found")
    return str(raw.get("model_type") or "")


def _remove_dead_staging(out: epath.Path) -> None:
    """Staging directories of exports killed before their move (their process is gone)."""
    if not is_local(out):  # (pids of other hosts say nothing here)
        return
    for d in out.glob(f"{_STAGING}*"):
        pid = d.name.removeprefix(_STAGING)
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            _remove_tree(d)
        except (OSError, OverflowError):  # alive (another export), or not a pid
            pass


def _remove_tree(d: epath.Path) -> None:
    with contextlib.suppress(OSError):
        d.rmtree(missing_ok=True)


def _move_in(staging: epath.Path, out: epath.Path) -> None:
    """The staged files into `out`, and the model files they do not replace out of it. config.json
    goes first and comes back last: a run killed meanwhile leaves a directory no loader takes
    for a model, never a mix of two that loads."""
    new = {p.name for p in staging.iterdir()}
    (out / "config.json").unlink(missing_ok=True)
    for p in out.iterdir():
        if p.name not in new and _is_model_file(p.name) and not p.is_dir():
            p.unlink()
    for name in sorted(new - {"config.json"}) + ["config.json"]:
        (staging / name).replace(out / name)


def convert_any(
    init_checkpoint: str,
    output_dir: str,
    bert_config_file: str | None = None,
    vocab_file: str | None = None,
    overwrite_output_dir: bool = False,
) -> list[str]:
    """`bert-jax convert` of any checkpoint (BERT family, XLNet, T5; directory or workdir): the
    lines it prints. `output_dir` may hold an earlier export of the same family (config.json's
    model_type), which the new one replaces whole; another family's only with
    `overwrite_output_dir`; a bert-jax workdir never."""
    out = epath.Path(output_dir)
    if (out / "checkpoints").is_dir():
        raise BertJaxError(
            f"--output_dir={output_dir}: a bert-jax workdir (it has checkpoints/), whose "
            "config.json is the run's; pass a new --output_dir"
        )
    old_type = None
    if not overwrite_output_dir:  # before any work
        try:
            old_type = _model_type(out / "config.json")
        except BertJaxError as e:
            raise BertJaxError(
                f"--output_dir={output_dir}: {e}; pass a new --output_dir, or "
                "--overwrite_output_dir to replace it"
            ) from None
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    _remove_dead_staging(out)
    staging = out / f"{_STAGING}{os.getpid()}"
    try:
        try:
            lines = _convert_any(init_checkpoint, str(staging), bert_config_file, vocab_file)
        except BertJaxError as e:  # name the directory asked for, not the staging one
            raise BertJaxError(str(e).replace(str(staging), output_dir)) from None
        new_type = _model_type(staging / "config.json")
        if old_type is not None and old_type != new_type:
            held = f"model_type {old_type!r}" if old_type else "no model_type: no HF model's"
            raise BertJaxError(
                f"--output_dir={output_dir} holds another model (config.json {held}), this one is "
                f"{new_type!r}: pass a new --output_dir, or --overwrite_output_dir to replace "
                "its model files"
            )
        _move_in(staging, out)
    except BaseException:
        _remove_tree(out if created else staging)
        raise
    _remove_tree(staging)
    return [line.replace(str(staging), output_dir) for line in lines]
