"""Config -> pretraining run: model, task, optional init checkpoint, the TPU memory check, the
loop, optional Hugging Face export. What `bert-jax pretrain` and `bert-jax demo` call.

Multi-host: every process runs all of it (the init checkpoint is read by each, and each places
only its own shards; the export gathers the trained weights with a collective); only process 0
writes the workdir's vocab.txt and the Hugging Face directory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from etils import epath
from jax.experimental import multihost_utils

from bert_jax.aot.pretraining import check_trainer_fits, pretraining_task_of
from bert_jax.arch import registry
from bert_jax.arch.bert.pretrained import graft_encoder, load_pretrained
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.input.geometry import (
    check_shard_geometry,
    check_shard_objective,
    read_run_shards,
    with_shard_geometry,
)
from bert_jax.pretraining.settings import pretrain_settings
from bert_jax.tokenization.byte_bpe import file_set_of, is_byte_bpe_file
from bert_jax.train.loop import TrainResult, maybe_initialize_distributed, train
from bert_jax.train.settings import train_settings


def _init_params_fn(path: str, bert_config: BertConfig) -> Callable[[Any], Any]:
    """fresh params -> the same tree with the checkpoint's encoder (and heads it has) grafted."""
    pre = load_pretrained(path)
    ours, theirs = bert_config.to_dict(), pre.config.to_dict()
    # Either side may have fields the other lacks (a config.json from an older version).
    diff = [k for k in sorted(ours.keys() | theirs.keys()) if ours.get(k) != theirs.get(k)]
    if diff:
        k = next((k for k in diff if k != "vocab_size"), "vocab_size")
        raise BertJaxError(
            f"{path}: init checkpoint has {k}={theirs.get(k)}, this run's model has {ours.get(k)}"
        )
    return lambda fresh: graft_encoder(fresh, pre.params)


def run_pretraining(config: Any, workdir: str, batches: Any = None) -> TrainResult:
    """Pretrain (BERT family or T5) into `workdir`; its last lines say where the curves' PNG is
    and how to open the TensorBoard events (bert_jax.train.curves)."""
    from bert_jax.train.curves import write_curves

    result = _pretrain(config, workdir, batches)
    write_curves(workdir)
    return result


def _pretrain(config: Any, workdir: str, batches: Any = None) -> TrainResult:
    shards = read_run_shards(config)  # their stats.json, read once and handed to every check
    check_shard_objective(config, shards)  # another objective's shards: named before all else
    family = registry.for_objective(config.objective)
    # T5 and its kin (bert_jax/configs/t5.py) have their own run (a seq2seq workdir), which
    # builds their task; the other tasks are pretraining_task_of's below.
    if family.task_kind == "encoder_decoder":
        from bert_jax.arch.seq2seq.pretrain_run import run_seq2seq_pretraining

        return run_seq2seq_pretraining(config, workdir, batches, shards)
    settings = train_settings(config)  # checked before the model, the vocab or the workdir
    config = with_shard_geometry(config, shards)  # max_seq_length etc. left unset: the shards'
    check_shard_geometry(config, shards)  # the shards' max_seq_length etc.
    run = pretrain_settings(config)  # the pretraining keys, typed, read from here on
    maybe_initialize_distributed(settings)
    task = pretraining_task_of(run, shards=shards)
    bert_config = task.bert_config  # a distillation task's is the student's
    wd = epath.Path(workdir)
    if run.init_checkpoint:
        family.check_init_checkpoint(run.init_checkpoint)
    init = _init_params_fn(run.init_checkpoint, bert_config) if run.init_checkpoint else None
    if run.teacher:
        if run.init_checkpoint:
            raise BertJaxError("config.teacher initialises the student: clear init_checkpoint")
        init = task.student_init
    if jax.process_index() == 0 and run.vocab_file:
        wd.mkdir(parents=True, exist_ok=True)
        if is_byte_bpe_file(run.vocab_file):  # RoBERTa's vocab.json + merges.txt
            for name, src in file_set_of(run.vocab_file).items():
                if not (wd / name).exists():
                    src.copy(wd / name)
        elif not (wd / "vocab.txt").exists():  # lets load_pretrained(workdir) find the vocab
            epath.Path(run.vocab_file).copy(wd / "vocab.txt")
    result = train(
        config,
        task,
        workdir,
        workdir_config={"bert": bert_config.to_dict()},
        init_params=init,
        batches=batches,
        preflight=check_trainer_fits,
        settings=settings,
    )
    if run.export_hf_dir and not result.preempted:
        # A collective: every process takes part, so sharded weights spanning hosts are whole.
        params = multihost_utils.process_allgather(result.state.params, tiled=True)
        if jax.process_index() == 0:
            vocab = run.vocab_file or None
            for line in family.export_pretrained(task, params, run.export_hf_dir, vocab):
                print(line)
    return result
