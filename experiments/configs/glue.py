"""Moved to bert_jax/configs/glue.py (installed with the package).
`--config=glue.py[:arg]` finds it by name from any directory; this path keeps working."""

from bert_jax.configs.glue import get_config

__all__ = ["get_config"]
