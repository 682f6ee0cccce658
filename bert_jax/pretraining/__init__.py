"""Pretraining tasks for the engine in `bert_jax.train`: what a pretraining run trains.

Modules: task (the encoder objectives' `PretrainingTask` and the config -> task wiring),
distillation (DistilBERT-style pretraining distillation from a teacher). The encoder-decoder
run's task is bert_jax.arch.seq2seq.pretraining_task's; which of the three a run trains,
`bert_jax.aot.pretraining.pretraining_task_of` chooses."""
