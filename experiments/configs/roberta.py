"""Lives in bert_jax/configs/roberta.py (installed with the package); this path keeps working."""

from bert_jax.configs.roberta import get_config

__all__ = ["get_config"]
