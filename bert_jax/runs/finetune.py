"""Fine-tune and evaluate: pretrained weights -> a training Task -> the shared loop -> dev metrics.

    results = finetune(cfg, workdir)      # one run, or the sweep/seeds the config asks for

`cfg` is a fine-tuning config (`bert_jax.train.config.finetune_config` + the task family's keys,
see experiments/configs/). The job is built once, here: the checkpoint's architecture loads it
(our workdir, a Hugging Face dir or a Google TF checkpoint); the task family's job
(`bert_jax.tasks.jobs`) reads and featurises the data once, wrapped for packing and for XLNet's
left padding where the config or the architecture asks; an encoder-decoder goes to its
text-to-text run instead; how the model starts (fine-tuned, a distilled student, frozen
features) is chosen once (`bert_jax.tasks.model_start`). Each run then takes the start's Task
and initial params and trains with the shared loop (`bert_jax.train.train`) on a copy of `cfg`
whose train_steps = int(train examples / batch * epochs) and warmup_steps = that x
`warmup_proportion`, as run_classifier.py (SQuAD counts windows, not questions); then run
`trainer.predict_step` over the dev (and test) splits and write `eval_results.json` and the
prediction files. Every JAX process trains and predicts (the steps are collective); only
process 0 writes the workdir's files.

Sweep (`cfg.sweep=True`): every (learning rate, epochs, batch) of the grid, each for `num_seeds`
seeds, in `<workdir>/runs/lr<lr>_ep<e>_bs<b>/seed<s>/`; `sweep_results.json` has mean, std and
median of every metric per grid point, and the top-level `eval_results.json` reports the point with
the best mean headline dev metric (mean and std over its seeds). `num_seeds > 1` without a sweep
does the same for the one configured point.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import jax
import numpy as np
from etils import epath

from bert_jax.aot.pretraining import check_trainer_fits
from bert_jax.arch import registry
from bert_jax.arch.seq2seq import text_to_text
from bert_jax.arch.xlnet import finetune as xlnet_finetune
from bert_jax.errors import BertJaxError
from bert_jax.tasks.arrays import TrainBatches, eval_batches
from bert_jax.tasks.distill.student_setup import Distillation
from bert_jax.tasks.finetune_setup import output_dir, run_config, run_mesh, write_json
from bert_jax.tasks.jobs import make_job
from bert_jax.tasks.model_start import encoder_config, model_start
from bert_jax.tasks.packed import PackedJob
from bert_jax.tokenization.directory import tokenizer_file_set
from bert_jax.train import loop
from bert_jax.train.curves import write_curves
from bert_jax.train.shared_steps import shared_steps
from bert_jax.train.validate import check_finetune_config


def _family(cfg) -> registry.Architecture:
    """The architecture of cfg.init_checkpoint; a TF checkpoint prefix or a directory that names
    none is read by the BERT family's loader (which says what it found)."""
    if not cfg.init_checkpoint:
        raise BertJaxError("config init_checkpoint is empty: give a workdir, HF dir or TF ckpt")
    return registry.for_checkpoint(cfg.init_checkpoint) or registry.get("bert")


def _tokenizer_and_weights(cfg):
    """(tokenizer, pretrained weights, do_lower_case) as the checkpoint's family loads them."""
    return _family(cfg).load_for_finetuning(cfg)


def _keep_tokenizer_files(vocab: Any, workdir: epath.Path) -> None:
    """The run's vocab beside its checkpoints, as pretraining does: the workdir is then itself
    an init_checkpoint for another fine-tuning (MNLI -> RTE) and a `convert` source."""
    if not vocab:
        return
    for name, src in tokenizer_file_set(vocab).items():
        if not (workdir / name).exists():
            src.copy(workdir / name)


def predict(trainer, params, arrays: dict[str, np.ndarray], batch_size: int):
    """`trainer.predict_step` over every row of `arrays` (the batch padded to a multiple of the
    batch devices, padding rows dropped): numpy outputs, or a tuple of them (SQuAD)."""
    n_dev = trainer.mesh.shape["data"] * trainer.mesh.shape["fsdp"]
    batch_size = -(-batch_size // n_dev) * n_dev
    specs = trainer.task.init_inputs()
    n = len(next(iter(arrays.values())))
    # Training-only columns (a distilled student's teacher outputs) are zeros here.
    cols = {
        k: arrays[k] if k in arrays else np.zeros((n, *specs[k].shape[1:]), specs[k].dtype)
        for k in trainer.batch_shardings
    }
    outs = []
    for batch, real in eval_batches(cols, batch_size):
        out = jax.device_get(trainer.predict_step(params, trainer.place_batch(batch)))
        outs.append(jax.tree.map(lambda x, r=real: np.asarray(x)[:r], out))
    return jax.tree.map(lambda *xs: np.concatenate(xs), *outs)


def run_once(
    cfg, job, pre, workdir: str | epath.Path, family: registry.Architecture, encoder: Any,
    start: Any,
) -> dict[str, float]:  # fmt: skip
    """Train one model (`cfg` from `run_config`) with the shared loop and score the dev split(s).
    `family`: the run's architecture; `encoder`: its model config; `start`: how its model starts
    (`bert_jax.tasks.model_start`); all three chosen once per job by `finetune`."""
    workdir = epath.Path(workdir)
    mesh = run_mesh(cfg)
    batch = job.rows_per_step(cfg.train_batch_size, mesh)
    begun = start.start(job, encoder, pre, batch, cfg.seed, cfg.learning_rate)
    task = begun.task
    result = loop.train(
        cfg,
        task,
        str(workdir),
        workdir_config=family.workdir_record(pre),
        init_params=begun.init,
        batches=TrainBatches(begun.train, batch, cfg.seed),
        mesh=mesh,
        preflight=check_trainer_fits,
    )
    result.require_finished(workdir, cfg.train_steps)
    trainer, params = result.trainer, result.state.params
    metrics: dict[str, float] = {}
    with output_dir(workdir) as out_dir:
        for split in job.evals:
            out = predict(trainer, params, split.arrays, cfg.eval_batch_size)
            metrics.update(job.score(split, out, out_dir))
        for split in job.tests:
            out = predict(trainer, params, split.arrays, cfg.eval_batch_size)
            job.write_test(split, out, out_dir)
    metrics["train_steps"] = float(cfg.train_steps)
    write_json(metrics, workdir / "eval_results.json")
    logging.info("%s: %s", workdir, metrics)
    write_curves(workdir, final=metrics)  # the run's last lines: the PNG, the events
    return metrics


def _summary(runs: list[dict[str, float]]) -> dict[str, float]:
    out = {}
    for k in runs[0]:
        v = np.asarray([r[k] for r in runs], np.float64)
        out[k] = float(v.mean())
        if len(runs) > 1:
            out[f"{k}_std"] = float(v.std(ddof=1))
            out[f"{k}_median"] = float(np.median(v))
    out["num_seeds"] = float(len(runs))
    return out


def finetune(cfg, workdir: str | epath.Path) -> dict[str, float]:
    check_finetune_config(cfg)  # before loading weights and data
    family = _family(cfg)
    if family.task_kind == "encoder_decoder":  # an encoder-decoder fine-tunes text-to-text
        metrics = text_to_text.finetune(cfg, workdir)
        write_curves(workdir, final=metrics)  # the run's last lines: the PNG, the events
        return metrics
    tokenizer, pre, lower = family.load_for_finetuning(cfg)
    # the encoder every run trains: checked before the data is read
    encoder = encoder_config(pre.config, family, cfg.dtype, cfg.get("dropout"),
                             cfg.get("attention_implementation", "xla"))  # fmt: skip
    job = make_job(cfg, do_lower_case=lower)
    if cfg.get("pack_examples", False):
        job = PackedJob(job, cfg, family.padding_side)
    if family.padding_side == "left":  # XLNet's layout in, the job's own layout out
        job = xlnet_finetune.XLNetLayoutJob(job)
    student_vocab = cfg.vocab_file or getattr(pre, "vocab_file", None)
    distill = Distillation.from_config(cfg, student_vocab, tokenizer)  # checks before the data
    if distill and not family.distills_students:
        raise BertJaxError(f"config distill: {family.title} is not a distillation student: "
                           f"{family.refusal('distillation student')}")  # fmt: skip
    job.load(tokenizer)
    if distill:
        logging.info("distillation rows: %s", distill.use_rows(job, tokenizer))
    start = model_start(cfg, family, distill)
    workdir = epath.Path(workdir)
    if jax.process_index() == 0:
        workdir.mkdir(parents=True, exist_ok=True)
        _keep_tokenizer_files(cfg.vocab_file or getattr(pre, "vocab_file", None), workdir)
    if hasattr(job, "stats"):
        write_json(job.stats, workdir / "data_stats.json")
    seeds = [cfg.seed + i for i in range(cfg.num_seeds)]
    if cfg.sweep:
        grid = list(
            itertools.product(cfg.sweep_learning_rates, cfg.sweep_epochs, cfg.sweep_batch_sizes)
        )
    else:
        grid = [(cfg.learning_rate, cfg.num_train_epochs, cfg.train_batch_size)]
    n = job.num_train_examples
    if len(grid) == 1 and len(seeds) == 1:
        return run_once(run_config(cfg, n, *grid[0], seeds[0]), job, pre, workdir, family, encoder,
                        start)  # fmt: skip
    points = []
    with shared_steps():  # the grid's runs and seeds trace one program (per batch size)
        for lr, ep, bs in grid:
            name = f"lr{lr:g}_ep{ep:g}_bs{bs}"
            point_dir = workdir / "runs" / name
            runs = [
                run_once(run_config(cfg, n, lr, ep, bs, s), job, pre, point_dir / f"seed{s}",
                         family, encoder, start)  # fmt: skip
                for s in seeds
            ]
            summary = _summary(runs)
            summary["headline"] = float(np.mean([job.headline(r) for r in runs]))
            points.append(
                {
                    "learning_rate": lr,
                    "num_train_epochs": ep,
                    "train_batch_size": bs,
                    "name": name,
                    "dev": summary,
                }
            )
    best = max(points, key=lambda p: p["dev"]["headline"])
    sweep_path = workdir / "sweep_results.json"
    write_json({"points": points, "best": best["name"]}, sweep_path)
    results = dict(best["dev"])
    results.update(
        {
            f"best_{k}": float(best[k])
            for k in ("learning_rate", "num_train_epochs", "train_batch_size")
        }
    )
    write_json(results, workdir / "eval_results.json")
    return results
