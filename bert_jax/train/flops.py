"""Model FLOPs per step (for MFU) and the peak they are compared against.

Per token (fwd + bwd = 3 x fwd, 2 FLOPs per MAC), counting matmul weights only:
encoder 6 * L * (4 d^2 + 2 d f) + 12 * L * d * T (bidirectional attention scores and values);
MLM head per predicted token 6 * (d^2 + d V) (gathered at masked positions); pooler + NSP per
sequence 6 * (d^2 + 2 d). No rematerialisation counted (MFU, not HFU), as the MFU definition
of the PaLM paper (appendix B) counts it.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from bert_jax.config import BertConfig

# Peak dense bf16 FLOP/s per chip (the vendors' published figures).
TPU_PEAK_FLOPS = {
    "TPU v3": 123e12,
    "TPU v4": 275e12,
    "TPU v5 lite": 197e12,
    "TPU v5e": 197e12,
    "TPU v5p": 459e12,
    "TPU v5": 459e12,
    "TPU v6 lite": 918e12,
    "TPU v6e": 918e12,
}


def encoder_flops_per_token(cfg: BertConfig, seq_len: int) -> float:
    d, f, n = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    return 6.0 * n * (4 * d * d + 2 * d * f) + 12.0 * n * d * seq_len


def pretraining_flops_per_step(
    cfg: BertConfig, batch: int, seq_len: int, predictions: int, use_nsp: bool = True
) -> float:
    d, v = cfg.hidden_size, cfg.vocab_size
    flops = batch * seq_len * encoder_flops_per_token(cfg, seq_len)
    flops += batch * predictions * 6.0 * (d * d + d * v)
    if use_nsp:
        flops += batch * 6.0 * (d * d + 2 * d)
    return flops


_MEASURED: dict[str, float] = {}


def measured_matmul_peak(device: jax.Device | None = None, n: int = 1024) -> float:
    """FLOP/s of a float32 n x n matmul chain on one device (the CPU denominator), measured once."""
    device = device or jax.devices()[0]
    key = f"{device.platform}:{n}"
    if key in _MEASURED:
        return _MEASURED[key]
    a = jax.device_put(jnp.ones((n, n), jnp.float32) / n, device)
    reps = 8

    @jax.jit
    def chain(x):
        for _ in range(reps):
            x = x @ a
        return x

    chain(a).block_until_ready()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        chain(a).block_until_ready()
        best = min(best, time.perf_counter() - t)
    _MEASURED[key] = reps * 2.0 * n**3 / best
    return _MEASURED[key]


def peak_flops(devices: list[jax.Device]) -> tuple[float, str]:
    """Total peak FLOP/s of `devices` and a label saying where it comes from.

    On CPU the fake devices share the same cores, so the peak is one measured matmul."""
    d0 = devices[0]
    if d0.platform == "tpu":
        kind = d0.device_kind
        for name, flops in TPU_PEAK_FLOPS.items():
            if kind.startswith(name):
                return flops * len(devices), f"{kind} bf16 peak"
    # A device of this process: with several processes, d0 may belong to another one.
    return measured_matmul_peak(jax.local_devices()[0]), "measured CPU f32 matmul"
