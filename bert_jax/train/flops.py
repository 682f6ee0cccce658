"""Model FLOPs per step (for MFU) and the peak they are compared against.

Per token (fwd + bwd = 3 x fwd, 2 FLOPs per MAC), counting matmul weights only:
encoder 6 * L * (4 d^2 + 2 d f) + 12 * L * d * T (bidirectional attention scores and values),
plus 6 * E * d for the projection of factorised embeddings of width E (ALBERT, ELECTRA); MLM head
per predicted token 6 * (d E + E V) (gathered at masked positions; E = d unless factorised; shared
layers cost the same FLOPs as unshared ones); pooler + NSP per
sequence 6 * (d^2 + 2 d). ELECTRA counts the generator and the discriminator. No
rematerialisation counted (MFU, not HFU), as the MFU definition
of the PaLM paper (appendix B) counts it.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from bert_jax.accelerators import GPU_PEAKS, TPU_CHIPS
from bert_jax.config import BertConfig


def encoder_flops_per_token(cfg: BertConfig, seq_len: int) -> float:
    d, f, n = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    flops = 6.0 * n * (4 * d * d + 2 * d * f) + 12.0 * n * d * seq_len
    if cfg.embedding_size is not None:
        flops += 6.0 * cfg.embedding_size * d
    return flops


def pretraining_flops_per_step(
    cfg: BertConfig, batch: int, seq_len: int, predictions: int, use_nsp: bool = True
) -> float:
    d, e, v = cfg.hidden_size, cfg.embed_dim, cfg.vocab_size
    flops = batch * seq_len * encoder_flops_per_token(cfg, seq_len)
    flops += batch * predictions * 6.0 * (d * e + e * v)
    if use_nsp:
        flops += batch * 6.0 * (d * d + 2 * d)
    return flops


def electra_flops_per_step(
    disc: BertConfig, generator_size: float, batch: int, seq_len: int, predictions: int
) -> float:
    """ELECTRA: the discriminator (encoder + per-token head 6 (d^2 + d)) plus the generator
    (its encoder over every token, its MLM head at the masked positions)."""
    from bert_jax.arch.electra.model import generator_config

    d = disc.hidden_size
    flops = batch * seq_len * (encoder_flops_per_token(disc, seq_len) + 6.0 * (d * d + d))
    gen = generator_config(disc, generator_size)
    return flops + pretraining_flops_per_step(gen, batch, seq_len, predictions, use_nsp=False)


def pretraining_saved_elements(
    cfg: BertConfig, batch: int, seq_len: int, predictions: int
) -> float:
    """Activation elements an ideally fused step must keep from the forward pass for the backward
    pass (each written once, read once): per token and layer the layer's input, q, k and v, the
    attention context, both norms' inputs, the FFN's input and its pre-activation (d x 8 + f; the
    activation's output, dropout masks and attention probabilities are recomputed or
    regenerated), the embeddings' norm input (E); per prediction the head's input,
    pre-activation and norm input (3 d; the logits never leave a fused cross-entropy)."""
    d, f, n = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    per_token = n * (8 * d + f) + cfg.embed_dim + (d if cfg.embedding_size is not None else 0)
    return float(batch * (seq_len * per_token + predictions * 3 * d))


_MEASURED: dict[str, float] = {}


def measured_matmul_peak(
    device: jax.Device | None = None, n: int = 1024, fresh: bool = False
) -> float:
    """FLOP/s of a float32 n x n matmul chain on one device (the CPU denominator): the best
    measured in this process; `fresh` probes again (a busy machine measures low)."""
    device = device or jax.devices()[0]
    key = f"{device.platform}:{n}"
    if key in _MEASURED and not fresh:
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
    _MEASURED[key] = max(_MEASURED.get(key, 0.0), reps * 2.0 * n**3 / best)
    return _MEASURED[key]


def peak_flops(devices: list[jax.Device]) -> tuple[float, str]:
    """Total peak FLOP/s of `devices` and a label saying where it comes from.

    A TPU's peak is per chip and a v2/v3 chip is two devices, so the total is the per-device
    peak times the devices; a GPU in `GPU_PEAKS` is one device. On CPU (or an unlisted GPU)
    the peak is one measured matmul: CPU fake devices share the same cores."""
    d0 = devices[0]
    chip = TPU_CHIPS.get(d0.device_kind) if d0.platform == "tpu" else None
    if chip is not None:
        return chip.peak_flops_per_device * len(devices), f"{d0.device_kind} bf16 peak"
    gpu = GPU_PEAKS.get(d0.device_kind) if d0.platform == "gpu" else None
    if gpu is not None:
        return gpu * len(devices), f"{d0.device_kind} bf16 peak"
    # A device of this process: with several processes, d0 may belong to another one.
    device = jax.local_devices()[0]
    return measured_matmul_peak(device), f"measured {device.platform.upper()} f32 matmul"
