"""Moved to bert_jax/configs/pretrain_cpu.py (installed with the package).
`--config=pretrain_cpu.py[:arg]` finds it by name from any directory; this path keeps working."""

from bert_jax.configs.pretrain_cpu import get_config

__all__ = ["get_config"]
