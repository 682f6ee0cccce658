"""One folder per architecture (`bert/`, `electra/`, `xlnet/`, `modernbert/`, `seq2seq/`,
`elmo/`), each holding its config, model, heads, checkpoint formats and `family.py` (its
`base.Architecture`); `registry` finds the right one for an objective, a checkpoint or a config.

A folder spans the package's layers: a file's name says where it sits (tests/test_import_layers.py,
ARCH_ROLES), so `model.py` stays importable by the trainer and `family.py` may use the trainer.
This `__init__` imports nothing, so reading one model file does not load every architecture."""
