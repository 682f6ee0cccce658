"""Pretraining tasks for the engine in `bert_jax.train`: what a pretraining run trains.

Modules: task (the encoder objectives' `PretrainingTask` and the config -> task wiring), seq2seq
(the encoder-decoder run's config -> task) with seq2seq_task (its Task), distillation
(DistilBERT-style pretraining distillation from a teacher)."""
