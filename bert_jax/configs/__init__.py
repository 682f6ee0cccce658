"""The run configs, installed with the package: `--config=NAME.py[:arg]` (or `NAME[:arg]`) finds
them by name from any directory (`bert_jax.config_files.resolve`). Each defines `get_config(arg)`
on top of `bert_jax.train.config`. Their former paths, experiments/configs/NAME.py, still work."""
