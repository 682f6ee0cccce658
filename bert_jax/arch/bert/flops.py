"""Model FLOPs of the BERT encoder per step (for MFU), and the activations an ideal step keeps.

Per token (fwd + bwd = 3 x fwd, 2 FLOPs per MAC), counting matmul weights only:
encoder 6 * L * (4 d^2 + 2 d f) + 12 * L * d * T (bidirectional attention scores and values),
plus 6 * E * d for the projection of factorised embeddings of width E (ALBERT, ELECTRA); MLM head
per predicted token 6 * (d E + E V) (gathered at masked positions; E = d unless factorised; shared
layers cost the same FLOPs as unshared ones); pooler + NSP per sequence 6 * (d^2 + 2 d). No
rematerialisation counted (MFU, not HFU), as the MFU definition of the PaLM paper (appendix B)
counts it. The peak they are compared against: `bert_jax.train.flops`.
"""

from __future__ import annotations

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
