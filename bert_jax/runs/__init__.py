"""Whole runs built from a config: pretraining (`bert_jax.runs.pretrain.run_pretraining`) with
its init checkpoint, TPU memory check and Hugging Face export. The layer above the trainer, the
AOT fit check and the interop it combines."""
