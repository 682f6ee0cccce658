"""Lives in bert_jax/configs/albert.py (installed with the package); this path keeps working."""

from bert_jax.configs.albert import get_config

__all__ = ["get_config"]
