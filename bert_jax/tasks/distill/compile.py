"""Task distillation at scale, compiled for a TPU slice from any machine (shapes only, no weights):

    bert-jax compile --config distill.py:tpu --topology v4-8

- the labelling step of `distill-data`: the teacher's forward over one host's chips (each host
  labels its own shards: `--worker_index`), the batch split over them, the weights replicated;
- the online student step (`--config.distill.teacher`): the student's train step with the frozen
  teacher's forward inside, over the whole slice's mesh.

The teacher and student sizes come from the config's `aot_teacher_model` / `aot_student_model`
presets (`bert_jax.config.preset`): the real runs read them from their checkpoints.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath
from flax.core import meta
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bert_jax.aot.fit import CompileReport, compile_step
from bert_jax.aot.pretraining import compile_trainer
from bert_jax.aot.topology import TpuSlice
from bert_jax.arch import registry
from bert_jax.config import preset
from bert_jax.tasks.distill.student import DistillTask
from bert_jax.tasks.distill.teacher import Teacher
from bert_jax.tasks.glue import get_spec
from bert_jax.tasks.jobs import JOBS
from bert_jax.train import build_trainer, make_mesh


def _num_outputs(config: Any) -> int:
    return {"glue": lambda: get_spec(config.task).num_labels, "ner": lambda: 9,
            "squad": lambda: 2}[config.task_family]()  # fmt: skip


def _teacher(config: Any) -> Teacher:
    bert = preset(config.aot_teacher_model).replace(dtype=config.dtype)
    return Teacher(bert, {}, config.task_family, _num_outputs(config), epath.Path("vocab.txt"),
                   True, f"preset {config.aot_teacher_model}")  # fmt: skip


def compile_labelling(config: Any, tpu: TpuSlice) -> tuple[CompileReport, int]:
    """(report, rows per step) of one host's labelling step."""
    devices = [d for d in tpu.devices() if d.process_index == 0]
    mesh = Mesh(np.array(devices), ("data",))
    batch = -(-config.eval_batch_size // len(devices)) * len(devices)
    teacher = _teacher(config)
    task = teacher.task(config.max_seq_length, batch)
    dummy = {k: jax.ShapeDtypeStruct((1, config.max_seq_length), jnp.int32)
             for k in ("input_ids", "input_mask", "segment_ids")}  # fmt: skip
    init = lambda k, b: task.model.init(k, **task.model_inputs(b))
    shapes = meta.unbox(jax.eval_shape(init, jax.random.PRNGKey(0), dummy))
    replicated = NamedSharding(mesh, PartitionSpec())
    params = jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s.shape, jnp.float32, sharding=replicated),
        shapes["params"],
    )
    rows = NamedSharding(mesh, PartitionSpec("data"))
    batch_specs = {k: jax.ShapeDtypeStruct((batch, config.max_seq_length), jnp.int32,
                                           sharding=rows) for k in dummy}  # fmt: skip
    arch = registry.for_model_config(teacher.config)  # a ModernBERT teacher counts its own
    per_token = arch.encoder_flops_per_token(teacher.config, config.max_seq_length)
    forward = batch * config.max_seq_length * per_token / 3  # forward only
    # The weights are replicated on purpose (each chip labels its own rows): not listed.
    report = compile_step(jax.jit(task.predict), (params, batch_specs), tpu.hbm_per_device,
                          model_flops_per_step=forward)  # fmt: skip
    return report, batch


def compile_online_student(config: Any, tpu: TpuSlice) -> tuple[CompileReport, Any]:
    """The student's train step with the teacher online, over the slice's mesh."""
    run = config.copy_and_resolve_references()
    run.train_steps = max(1, run.get("train_steps") or 1000)
    run.warmup_steps = int(run.train_steps * run.warmup_proportion)
    student = preset(config.aot_student_model).replace(dtype=config.dtype)
    job = JOBS[config.task_family](config)
    base = job.train_task(student, config.train_batch_size)
    d = config.distill
    task = DistillTask(base, d.loss, float(d.temperature), float(d.alpha), _teacher(config))
    trainer = build_trainer(run, task, make_mesh(config.mesh, tpu.devices()))
    return compile_trainer(trainer, tpu.hbm_per_device), trainer
