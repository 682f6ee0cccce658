"""Lives in bert_jax/configs/electra.py (installed with the package); this path keeps working."""

from bert_jax.configs.electra import get_config

__all__ = ["get_config"]
