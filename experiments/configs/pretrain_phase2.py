"""Moved to bert_jax/configs/pretrain_phase2.py (installed with the package).
`--config=pretrain_phase2.py[:arg]` finds it by name from any directory; this path keeps working."""

from bert_jax.configs.pretrain_phase2 import get_config

__all__ = ["get_config"]
