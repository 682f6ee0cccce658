"""XLNet: Transformer-XL with two-stream attention (bert_jax.arch.xlnet.model)."""

from bert_jax.arch.xlnet.config import XLNetConfig, xlnet_preset
from bert_jax.arch.xlnet.model import XLNet, XLNetLM, XLNetOutput

__all__ = ["XLNet", "XLNetConfig", "XLNetLM", "XLNetOutput", "xlnet_preset"]
