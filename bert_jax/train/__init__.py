"""Training: mesh + logical rules, optimizer, losses, the jitted step, the task-agnostic loop,
Orbax checkpoints, metrics: the engine. Pretraining (`bert_jax.pretraining`) and fine-tuning
(`bert_jax.tasks`) both run through here.

Interfaces other parts use (stable):

    from bert_jax.train import build_trainer, train, restore_params, make_mesh

    task: bert_jax.train.task.Task   # model, init_inputs(), model_inputs(batch),
                                     # loss_fn(params, batch, rng, deterministic) -> (loss, metrics)
                                     # flops_per_step(B); for the loop also train_input(trainer)
                                     # and optionally evaluate(trainer, params) -> dict
    mesh = make_mesh(config.mesh)                      # ('data','fsdp','tensor'), -1 = the rest
    trainer = build_trainer(config, task, mesh)        # data-free: usable for AOT compilation
    trainer.abstract_state()    # TrainState of ShapeDtypeStruct(+sharding): lower/compile, restore
    trainer.batch_specs()       # dict of ShapeDtypeStruct(+sharding) for one global batch
    trainer.batch_shardings     # dict name -> NamedSharding
    trainer.state_shardings     # TrainState of NamedSharding
    trainer.train_step          # jax.jit(state, batch) -> (state, metrics); state donated
    trainer.eval_step           # jax.jit(params, batch) -> metrics (deterministic)
    trainer.predict_step        # jax.jit(params, batch) -> task.predict outputs (None without)
    trainer.flops_per_step      # model FLOPs per optimizer step (MFU numerator)
    trainer.train_step.lower(trainer.abstract_state(), trainer.batch_specs()).compile()

    result = train(config, task, workdir, workdir_config={"bert": bert_config.to_dict()},
                   init_params=None)               # resumes from workdir/checkpoints if present
    bert_config, params = restore_params(workdir)   # latest checkpoint, unboxed, looped layout

Modules: mesh (mesh, rules, shardings), optimizer (AdamW / reference Adam / LAMB, schedules),
trainer (TrainState, the step), loop
(train), checkpoint (the only Orbax user), writers (metrics.jsonl, TensorBoard, console),
flops (model FLOPs, peak FLOP/s).
"""

from bert_jax.checkpoint import Checkpointer, restore_params
from bert_jax.train.loop import TrainResult, maybe_initialize_distributed, train
from bert_jax.train.mesh import DEFAULT_RULES, make_mesh
from bert_jax.train.trainer import Trainer, TrainState, build_trainer

__all__ = [
    "DEFAULT_RULES",
    "Checkpointer",
    "TrainResult",
    "TrainState",
    "Trainer",
    "build_trainer",
    "make_mesh",
    "maybe_initialize_distributed",
    "restore_params",
    "train",
]
