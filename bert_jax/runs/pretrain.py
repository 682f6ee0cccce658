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

from bert_jax.aot.pretraining import check_trainer_fits
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.interop import export_hf, graft_encoder, load_pretrained
from bert_jax.train.loop import TrainResult, maybe_initialize_distributed, train
from bert_jax.train.pretraining import bert_config_from, pretraining_task


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
    maybe_initialize_distributed(config)
    bert_config = bert_config_from(config)
    task = pretraining_task(config, bert_config)
    wd = epath.Path(workdir)
    init = _init_params_fn(config.init_checkpoint, bert_config) if config.init_checkpoint else None
    if jax.process_index() == 0 and config.get("vocab_file"):
        wd.mkdir(parents=True, exist_ok=True)
        if not (wd / "vocab.txt").exists():  # lets load_pretrained(workdir) find the vocab
            epath.Path(config.vocab_file).copy(wd / "vocab.txt")
    result = train(
        config,
        task,
        workdir,
        workdir_config={"bert": bert_config.to_dict()},
        init_params=init,
        batches=batches,
        preflight=check_trainer_fits,
    )
    if config.get("export_hf_dir") and not result.preempted:
        # A collective: every process takes part, so sharded weights spanning hosts are whole.
        params = multihost_utils.process_allgather(result.state.params, tiled=True)
        if jax.process_index() == 0:
            vocab = config.vocab_file or None
            out = export_hf(bert_config, params, config.export_hf_dir, vocab_file=vocab)
            print(f"exported Hugging Face model to {out}")
    return result
