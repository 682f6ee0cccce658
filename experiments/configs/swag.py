"""Moved to bert_jax/configs/swag.py (installed with the package).
`--config=swag.py[:arg]` finds it by name from any directory; this path keeps working."""

from bert_jax.configs.swag import get_config

__all__ = ["get_config"]
