"""Load an encoder-decoder from a Hugging Face T5 directory or a bert-jax seq2seq workdir (its
config.json holds the model under "seq2seq" and may name the tokenizer under "spm_model"), with
the tokenizer to read and write text: spiece.model, or the tokenizer.json transformers v5 saves
alone (`T5Vocab` reads both)."""

from __future__ import annotations

import dataclasses
import json
import os

from etils import epath

from bert_jax.arch.seq2seq import Seq2SeqConfig, unstack_seq2seq
from bert_jax.arch.seq2seq.t5_checkpoints import read_t5_dir
from bert_jax.checkpoint import read_workdir_config
from bert_jax.errors import BertJaxError
from bert_jax.interop.workdir_params import restore_workdir_params
from bert_jax.tokenization.t5_vocab import t5_tokenizer_in


@dataclasses.dataclass(frozen=True)
class Seq2SeqPretrained:
    config: Seq2SeqConfig
    params: dict  # unboxed, looped layout, float32 numpy
    spm_model: epath.Path | None  # spiece.model or tokenizer.json
    source: str


def load_seq2seq(path: str | os.PathLike, step: int | None = None) -> Seq2SeqPretrained:
    path = epath.Path(path)
    if not path.is_dir():
        raise BertJaxError(f"{path}: not a directory (a Hugging Face T5 dir or a bert-jax workdir)")
    if (path / "checkpoints").is_dir():
        return _load_workdir(path, step)
    if not (path / "config.json").exists():
        raise BertJaxError(f"{path}: no config.json (not a Hugging Face T5 dir or a workdir)")
    cfg, params = read_t5_dir(path)
    return Seq2SeqPretrained(cfg, params, t5_tokenizer_in(path), str(path))


def _load_workdir(path: epath.Path, step: int | None) -> Seq2SeqPretrained:
    record = read_workdir_config(path)
    if "seq2seq" not in record:
        raise BertJaxError(f"{path / 'config.json'}: has no 'seq2seq' model config")
    cfg = Seq2SeqConfig.from_dict(record["seq2seq"], str(path / "config.json"))
    params = unstack_seq2seq(restore_workdir_params(path, step))
    # The workdir's own copy first: the recorded path may be relative to another directory.
    spm = record.get("spm_model") or (record.get("config") or {}).get("spm_model")
    candidates = (t5_tokenizer_in(path), epath.Path(spm) if spm else None)
    found = [p for p in candidates if p is not None and p.exists()]
    return Seq2SeqPretrained(cfg, params, found[0] if found else None, str(path))


def write_workdir_record(cfg: Seq2SeqConfig, spm_model: str | None) -> dict:
    """The extra entries a seq2seq run's config.json holds (see `bert_jax.train.loop.train`)."""
    return json.loads(json.dumps({"seq2seq": cfg.to_dict(), "spm_model": spm_model}))
