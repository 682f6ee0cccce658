"""`bert-jax ablate --scale tpu`: the paper's recipe per arm, checked to fit, as a launch script.

For every distinct pretraining run of the table this writes the phase-1 (128 tokens, 900k steps,
keeping its checkpoint at every quarter for Figure 5) and phase-2 (512 tokens, 100k steps, from
phase 1) `bert-jax pretrain` commands with the arm's objective, model and masking mix, and the
`bert-jax finetune` commands of its tasks over the seeds at the scale's fine-tuning budget
(Figure 5's arms from their phase-1 step, the others from phase 2), each wrapped in
`python tpu_setup/tpu.py run --name TPU_NAME` so that it runs on every worker of the slice.
Before writing anything, each run's train step is compiled ahead of time
for the slice (`bert_jax.aot`, libtpu's compile-only devices: `pip install 'bert-jax[tpu]'`),
phase 1 and phase 2 both (512 tokens needs more memory than 128); a run that does not fit stops
the plan with the knobs to turn. Runs whose steps are the same program (Table 8's masking mixes
differ only in the input pipeline, NSP and SOP only in their data) are compiled once per
process.

  WORKDIR/plan/<table>.sh      the commands, in order (shards first, then arm by arm)
  WORKDIR/plan/<table>.json    per run: key, config overrides, the fit report's numbers
"""

from __future__ import annotations

import dataclasses
import json
import shlex

from etils import epath

from bert_jax import objectives
from bert_jax.ablations import tables
from bert_jax.ablations.inputs import FAMILY
from bert_jax.ablations.layout import arm_subdir, budget_subdir
from bert_jax.ablations.scales import BILSTM_HEAD_LR, Scale
from bert_jax.ablations.workdir import shard_objective
from bert_jax.atomic_write import write_json_atomic, write_text_atomic
from bert_jax.errors import BertJaxError
from bert_jax.train.config import pretrain_config

_FINETUNE_CONFIG = {"glue": "glue.py:{kind}", "ner": "ner.py", "squad": "squad.py:v1.1"}


def run_overrides(run: tables.Pretrain, scale: Scale, data: str, phase: int) -> dict:
    """The `--config.*` values of one phase of a pretraining run (paper hyperparameters)."""
    flag = shard_objective(run.objective)
    seq = scale.seq if phase == 1 else scale.phase2_seq
    out = {
        "objective": run.objective,
        "family": run.family,
        "train_files": f"{data}/{flag}{seq}/train/shard-*.tfrecord",
        "eval_files": f"{data}/{flag}{seq}/eval/shard-*.tfrecord",
        "vocab_file": f"{data}/vocab.txt",
        "global_batch_size": scale.batch,
        "learning_rate": scale.learning_rate,
        "warmup_steps": scale.warmup,
        "max_seq_length": seq,
        "max_predictions_per_seq": scale.predictions if phase == 1 else 80,
        # Phase 2 is the same fraction of every run (ELECTRA's table gives arms other steps).
        "train_steps": run.steps if phase == 1 else scale.phase2_steps * run.steps // scale.steps,
        "dtype": scale.dtype,
        # The scale's pretraining dropout (0 at host), not the config's default 0.1
        "hidden_dropout_prob": scale.dropout,
        "attention_probs_dropout_prob": scale.dropout,
    }
    quarter = _quarter(run) if phase == 1 else 0
    if quarter:  # Figure 5 fine-tunes the checkpoint of each quarter
        out["keep_checkpoint_every_steps"] = quarter
    if objectives.get(run.objective).masking is not None:
        mask, rnd = run.mask_and_random_prob
        out.update(dynamic_masking=True, mask_prob=mask, random_prob=rnd)
    return out


# Step config + topology -> fit numbers: arms whose steps are one program compile once.
_FITS: dict[str, dict] = {}


def fit_check(run: tables.Pretrain, overrides: dict, topology: str) -> dict:
    from bert_jax.aot.pretraining import compile_pretraining, not_fit_message

    # The step's shapes and sharding; files and masking only matter to the input pipeline.
    skip = {"train_files", "eval_files", "vocab_file", "dynamic_masking", "mask_prob",
            "random_prob", "keep_checkpoint_every_steps"}  # fmt: skip
    step = {k: v for k, v in overrides.items() if k not in skip}
    # Keyed by what decides the program's shapes and memory: NSP and SOP share the pair head,
    # an MLM-only step is the same whatever its pairing, and step counts and learning rates
    # are constants of the schedule.
    spec = objectives.get(step["objective"])
    heads = sorted("pair" if h in ("nsp", "sop") else h for h in spec.heads)
    constants = {"train_steps", "learning_rate", "warmup_steps", "objective"}
    program = {k: v for k, v in step.items() if k not in constants}
    memo = json.dumps([run.model, topology, program, heads, spec.causal, spec.architecture],
                      sort_keys=True)  # fmt: skip
    if memo in _FITS:
        return _FITS[memo]
    config = pretrain_config(run.model)
    config.update(step)
    config.vocab_size = 30522
    report, trainer = compile_pretraining(config, topology)
    if not report.fits:
        seq = step["max_seq_length"]
        raise BertJaxError(f"{run.key} at {seq} tokens: "
                           + not_fit_message(report, config, trainer, topology))  # fmt: skip
    _FITS[memo] = {"fits": True, "required_gib": report.required_bytes / 2**30,
                   "flops_per_step": trainer.flops_per_step}  # fmt: skip
    return _FITS[memo]


def _quarter(run: tables.Pretrain) -> int:
    """Figure 5's checkpoint interval: a quarter of phase 1 if it falls on the pretraining
    config's save interval (else 0: that checkpoint would never be written)."""
    every = int(pretrain_config(run.model).checkpoint_every_steps)
    quarter = max(run.steps // 4, 1)
    return 0 if quarter % every else quarter


def _flags(overrides: dict) -> str:
    return " ".join(f"--config.{k}={shlex.quote(str(v))}" for k, v in overrides.items())


def plan(
    table: str, scale: Scale, workdir: str, topology: str, tpu_name: str, tasks: dict[str, str],
    only_tasks: tuple[str, ...] = (),
) -> dict:
    arms, _ = tables.select_tasks(table, tables.get(table).arms(scale), only_tasks)
    if any(arm.pretrain.checkpoint for arm in arms):
        raise BertJaxError(f"--table {table} fine-tunes a released model on the built-in suite: "
                           "run it at --scale cpu, or host without --topology")  # fmt: skip
    data = f"{workdir}/data"
    on_tpu = f"python tpu_setup/tpu.py run --name {shlex.quote(tpu_name or 'TPU_NAME')} --"
    lines = ["#!/usr/bin/env bash", f"# bert-jax ablate --table {table} --scale tpu", "set -eu",
             f"# Shards: bert-jax create-pretraining-data --objective nsp|sop|full_sentences "
             f"--dynamic_masking --max_seq_length 128|512 into "
             f"{data}/<nsp|sop|full_sentences><128|512>/{{train,eval}}; vocab "
             f"{data}/vocab.txt"]  # fmt: skip
    runs: dict[str, dict] = {}
    for arm in arms:
        run = arm.pretrain
        if arm.step is not None:  # a Figure 5 point: its checkpoint is kept? (before compiling)
            kept = _quarter(run)
            if not kept or arm.step % kept:
                every = pretrain_config(run.model).checkpoint_every_steps
                raise BertJaxError(f"{arm.name}: no checkpoint is kept at step {arm.step}; give "
                                   f"--steps whose quarters are multiples of {every}")  # fmt: skip
        p1, p2 = f"{workdir}/pretrain/{run.key}-p1", f"{workdir}/pretrain/{run.key}-p2"
        if run.key not in runs and run.steps:
            one, two = (run_overrides(run, scale, data, phase) for phase in (1, 2))
            fit = {"phase1": fit_check(run, one, topology)}
            if two["train_steps"]:
                fit["phase2"] = fit_check(run, two, topology)
            runs[run.key] = {"phase1": one, "phase2": two, "fit": fit}
            config = f"experiments/configs/pretrain.py:{run.model}"
            lines.append(f"{on_tpu} bert-jax pretrain --config {config} --workdir {p1} "
                         f"{_flags(one)}")  # fmt: skip
            if two["train_steps"]:
                lines.append(f"{on_tpu} bert-jax pretrain --config {config} --workdir {p2} "
                             f"--config.init_checkpoint={p1} {_flags(two)}")  # fmt: skip
        source = p2 if scale.phase2_steps else p1  # `host` scale: one phase
        if not run.steps and run.key not in runs:  # the model at init: one step at lr 0
            zero = {"objective": run.objective, "train_steps": 1, "learning_rate": 0.0,
                    "warmup_steps": 0, "schedule": "constant", "vocab_file": f"{data}/vocab.txt",
                    "train_files": f"{data}/{shard_objective(run.objective)}{scale.seq}/train/"
                    "shard-*.tfrecord"}  # fmt: skip
            runs[run.key] = {"phase1": zero}
            source = f"{workdir}/pretrain/{run.key}"
            lines.append(f"{on_tpu} bert-jax pretrain --config experiments/configs/pretrain.py:"
                         f"{run.model} --workdir {source} {_flags(zero)}")  # fmt: skip
        elif not run.steps:
            source = f"{workdir}/pretrain/{run.key}"
        if arm.step is not None:  # Figure 5: the phase-1 checkpoint of that step
            source = p1
        for task in arm.tasks:
            kind = task.removesuffix("_feature")
            if kind not in FAMILY:  # intrinsic: the pretraining run's own eval metrics
                continue
            config = "experiments/configs/" + _FINETUNE_CONFIG[FAMILY[kind]].format(kind=kind)
            extra = {"init_checkpoint": source, "data_dir": tasks.get(kind, f"DATA/{kind}"),
                     "num_seeds": scale.seeds, "learning_rate": scale.finetune_lr,
                     "num_train_epochs": scale.epochs_for(task),
                     **({"dropout": scale.finetune_dropout} if scale.finetune_dropout else {}),
                     **({"init_checkpoint_step": arm.step} if arm.step is not None else {}),
                     **({"bilstm_size": scale.lstm_size, "head_learning_rate": BILSTM_HEAD_LR}
                        if arm.bilstm else {}),
                     **({"feature_based": True} if task.endswith("_feature") else {})}  # fmt: skip
            budget = budget_subdir(scale, scale.finetune_lr, task)
            out = f"{workdir}/finetune/{arm_subdir(arm, task)}/{budget}"
            lines.append(f"{on_tpu} bert-jax finetune --config {config} --workdir {out} "
                         f"{_flags(extra)}")  # fmt: skip
    out_dir = epath.Path(workdir) / "plan"
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / f"{table}.sh", "\n".join(lines) + "\n")
    doc = {"table": table, "topology": topology, "scale": dataclasses.asdict(scale),
           "runs": runs}  # fmt: skip
    write_json_atomic(out_dir / f"{table}.json", doc, sort_keys=True)
    print(f"every pretraining run fits {topology}; wrote {out_dir}/{table}.sh")
    return json.loads(json.dumps(doc))
