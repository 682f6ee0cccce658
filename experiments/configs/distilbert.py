"""Lives in bert_jax/configs/distilbert.py (installed with the package); this path keeps working."""

from bert_jax.configs.distilbert import get_config

__all__ = ["get_config"]
