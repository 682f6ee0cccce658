"""Moved to bert_jax/configs/ner.py (installed with the package).
`--config=ner.py[:arg]` finds it by name from any directory; this path keeps working."""

from bert_jax.configs.ner import get_config

__all__ = ["get_config"]
