"""Config -> encoder-decoder pretraining run (T5 span corruption / prefix LM) through the one
loop: what `bert-jax pretrain` runs when config.objective is an encoder-decoder objective
(bert_jax/configs/t5.py). The workdir is a seq2seq workdir: config.json holds the model under
"seq2seq" and names the sentencepiece model copied beside it, so `bert-jax generate
--init_checkpoint=WORKDIR` decodes from it (bert_jax.arch.seq2seq.load)."""

from __future__ import annotations

from typing import Any

import jax
from etils import epath

from bert_jax.aot.pretraining import check_trainer_fits
from bert_jax.arch.seq2seq.pretraining_task import seq2seq_pretraining_task
from bert_jax.errors import BertJaxError
from bert_jax.input.geometry import RunShards
from bert_jax.tokenization.t5_vocab import SPIECE, TOKENIZER_JSON
from bert_jax.train.loop import TrainResult, maybe_initialize_distributed, train
from bert_jax.train.settings import train_settings


def run_seq2seq_pretraining(
    config: Any, workdir: str, batches: Any = None, shards: RunShards | None = None
) -> TrainResult:
    """`shards`: the run's stats.json records, as runs.pretrain read them (read when None)."""
    settings = train_settings(config)
    if config.get("init_checkpoint"):
        raise BertJaxError("config.init_checkpoint: not supported for seq2seq pretraining yet")
    maybe_initialize_distributed(settings)
    task = seq2seq_pretraining_task(config, shards=shards)
    wd = epath.Path(workdir)
    # transformers' file names (spiece.model, or a T5 tokenizer.json); the workdir is self-contained
    spm = wd / (TOKENIZER_JSON if str(config.spm_model).endswith(".json") else SPIECE)
    if jax.process_index() == 0 and not spm.exists():
        wd.mkdir(parents=True, exist_ok=True)
        epath.Path(config.spm_model).copy(spm)
    record = {"seq2seq": task.config.to_dict(), "spm_model": str(spm)}
    return train(config, task, workdir, workdir_config=record, batches=batches,
                 preflight=check_trainer_fits, settings=settings)  # fmt: skip
