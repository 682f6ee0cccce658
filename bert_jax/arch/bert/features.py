"""`extract-features` and `attention-map` for the BERT encoder (BERT, RoBERTa, ALBERT, ELECTRA's
discriminator, DistilBERT): any checkpoint `load_pretrained` reads, through the reference-format
extractor and the attention probabilities of `bert_jax.features`. The other architectures' readers
have the same two functions and `UNREAD` (their `features.py`)."""

from __future__ import annotations

from bert_jax.features.attention_map import (
    AttentionMap,
    attention_probs,
    check_layer_head,
    pick_head,
)
from bert_jax.features.extract import extract_to_file
from bert_jax.features.loading import load_encoder

UNREAD: tuple[str, ...] = ()  # flags it does not read (it reads them all)


def extract(run, lower, dtype, bert_config_file, vocab_file) -> int:
    config, params, tokenizer = load_encoder(run[0], bert_config_file, vocab_file, lower, dtype)
    return extract_to_file(config, params, tokenizer, *run[1:])


def attention_map(path, text, text_b, layer, head, lower, bert_config_file, vocab_file,
                  kind) -> AttentionMap:  # fmt: skip
    config, params, tokenizer = load_encoder(path, bert_config_file, vocab_file, lower)
    n, h = config.num_hidden_layers, config.num_attention_heads
    layer = check_layer_head(layer, head, n, h, "the model")
    tokens, probs_NxHxLxL = attention_probs(config, params, tokenizer, text, text_b)
    probs, label = pick_head(probs_NxHxLxL[layer], head)
    return AttentionMap(tokens, tokens, probs, layer, label)
