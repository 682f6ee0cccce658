"""A config (bert_jax/configs/t5.py) -> the encoder-decoder pretraining task: the model from a
seq2seq preset plus size overrides, the objective's geometry (inputs = config.max_seq_length,
targets as the objective needs), and the train / held-out batches read from the shards
`create-pretraining-data --objective=span_corruption|prefix_lm` wrote. What `bert-jax pretrain`
and `bert-jax compile` build when config.objective is an encoder-decoder objective.

The shards are held in memory (`bert_jax.input.seq2seq`): CPU-scale corpora, or a slice of a
large one per run; a streaming reader for C4-sized data is not built.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bert_jax import objectives
from bert_jax.arch import registry
from bert_jax.arch.seq2seq import Seq2SeqConfig, seq2seq_preset
from bert_jax.arch.seq2seq.train_task import Seq2SeqTask
from bert_jax.errors import BertJaxError
from bert_jax.input.batches import expand_files
from bert_jax.input.geometry import RunShards, run_shards
from bert_jax.input.seq2seq import Seq2SeqBatches, read_shards
from bert_jax.objectives.base import Seq2SeqObjective

# Config keys that override the preset's sizes when set (None = the preset's).
SIZE_KEYS = ("d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads")


def objective_of(config: Any) -> Seq2SeqObjective:
    spec = objectives.get(config.objective)
    if registry.get(spec.architecture).task_kind != "encoder_decoder":
        raise BertJaxError(f"config.objective={config.objective}: not an encoder-decoder "
                           f"objective ({', '.join(objectives.seq2seq_names())})")  # fmt: skip
    return spec


def vocab_of(config: Any):
    """The T5 vocabulary (pieces + 100 sentinels) of config.spm_model, or None without one."""
    if not config.get("spm_model"):
        return None
    from bert_jax.tokenization.t5_vocab import T5Vocab

    return T5Vocab(config.spm_model)


def seq2seq_config_from(config: Any, vocab_size: int) -> Seq2SeqConfig:
    sizes = {k: config.get(k) for k in SIZE_KEYS if config.get(k) is not None}
    for key, value in sizes.items():  # named as the user set them, before any work
        if value < 1:
            raise BertJaxError(f"config.{key}={value}: must be >= 1")
    if "num_layers" in sizes and "num_decoder_layers" not in sizes:
        sizes["num_decoder_layers"] = sizes["num_layers"]
    return seq2seq_preset(
        config.model, vocab_size=vocab_size, dropout_rate=float(config.dropout_rate),
        dtype=config.dtype, scan_layers=bool(config.scan_layers),
        remat_policy=config.remat_policy, **sizes,
    )  # fmt: skip


def check_seq2seq_shards(
    config: Any, targets_length: int, vocab_size: int, shards: RunShards | None = None
) -> None:
    """The shards' stats.json against the run: objective, lengths and vocabulary (sentinel ids
    count down from its size) must be the run's; shards without a stats.json are read as is."""
    for record in run_shards(config, shards):
        key, path, settings = record.key, record.path, record.settings
        ours = {"objective": objectives.get(config.objective).name,
                "inputs_length": int(config.max_seq_length), "targets_length": targets_length,
                "vocab_size": vocab_size}  # fmt: skip
        for k, want in ours.items():
            have = settings.get(k)
            if have is not None and have != want:
                fix = {
                    "objective": f"--config.objective={have}",
                    "inputs_length": f"--config.max_seq_length={have}",
                    "vocab_size": "--config.spm_model=<the shards' spm_model>",
                }.get(k, f"--config.max_seq_length={settings.get('inputs_length')}")
                raise BertJaxError(
                    f"{config[key]}: the shards have {k}={have} ({path}), this run {want}: add "
                    f"{fix}, or rewrite the shards with create-pretraining-data "
                    f"--objective={config.objective} --max_seq_length={config.max_seq_length}"
                )


def _eval_batches(arrays: dict[str, np.ndarray], batch: int, max_steps: int) -> list[dict]:
    """Held-out batches of the training batch size; the last one padded with all-padding rows,
    which weigh nothing (every metric is weighted by non-padding target tokens)."""
    n = len(arrays["inputs"])
    if max_steps > 0:
        n = min(n, max_steps * batch)
    out = []
    for start in range(0, n, batch):
        rows = {k: v[start : min(start + batch, n)].astype(np.int32) for k, v in arrays.items()}
        short = batch - len(rows["inputs"])
        out.append({k: np.pad(v, ((0, short), (0, 0))) for k, v in rows.items()})
    return out


def seq2seq_pretraining_task(
    config: Any, with_data: bool = True, shards: RunShards | None = None
) -> Seq2SeqTask:
    """The task of a seq2seq pretraining config; `with_data=False` builds shapes only (AOT).
    `shards`: the run's stats.json records (read here when None)."""
    spec = objective_of(config)
    vocab = vocab_of(config)
    vocab_size = vocab.size if vocab is not None else int(config.vocab_size)
    inputs_length = int(config.max_seq_length)
    _, targets_length = spec.lengths(inputs_length)
    model_config = seq2seq_config_from(config, vocab_size)
    batch = int(config.global_batch_size)
    train_data = eval_data = None
    if with_data:
        if not config.get("train_files"):
            raise BertJaxError("config.train_files is required (create-pretraining-data shards)")
        if vocab is None:
            raise BertJaxError("config.spm_model is required: the shards' T5 sentencepiece model")
        check_seq2seq_shards(config, targets_length, vocab_size, shards)
        train = read_shards(expand_files(config.train_files), inputs_length, targets_length)
        train_data = Seq2SeqBatches(batch, int(config.seed), arrays=train)
        if config.get("eval_files"):
            held_out = read_shards(expand_files(config.eval_files), inputs_length, targets_length)
            eval_data = _eval_batches(held_out, batch, int(config.max_eval_steps))
    return Seq2SeqTask(
        model_config, batch, inputs_length, targets_length, train_data=train_data,
        eval_data=eval_data,
        first_sentinel_id=vocab.pieces if vocab is not None and spec.uses_sentinels else None,
    )  # fmt: skip
