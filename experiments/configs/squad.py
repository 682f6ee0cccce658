"""Moved to bert_jax/configs/squad.py (installed with the package).
`--config=squad.py[:arg]` finds it by name from any directory; this path keeps working."""

from bert_jax.configs.squad import get_config

__all__ = ["get_config"]
