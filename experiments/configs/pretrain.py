"""Moved to bert_jax/configs/pretrain.py (installed with the package).
`--config=pretrain.py[:arg]` finds it by name from any directory; this path keeps working."""

from bert_jax.configs.pretrain import get_config

__all__ = ["get_config"]
