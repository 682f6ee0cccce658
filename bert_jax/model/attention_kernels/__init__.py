"""Fused attention kernels behind `bert_jax.model.attention_core.attend`: cuDNN (GPU) and Splash
(TPU). Each maps the one `AttentionMask` onto what its kernel accepts; see attention_core."""
