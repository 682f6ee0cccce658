"""`extract-features` and `attention-map` for Hugging Face ModernBERT directories (config.json,
model.safetensors, tokenizer.json): [CLS] A [SEP] (B [SEP]) padded with [PAD], no token types.

Features are transformers' hidden states (layer -1 after the final norm). Every layer's attention
probabilities come from that layer's own q and k (its `Wqkv` output, tapped while the model runs)
with the model's rotary angles and mask: global layers see every token, the others a window of
`local_attention` tokens (`|i - j| <= local_attention // 2`), so their maps are banded.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath

from bert_jax.arch.bert import hf
from bert_jax.arch.modernbert import ModernBertConfig, ModernBertModel
from bert_jax.arch.modernbert import hf as modernbert_hf
from bert_jax.arch.modernbert.heads import ENCODER_SCOPE
from bert_jax.arch.modernbert.model import rotary, rotate
from bert_jax.errors import BertJaxError
from bert_jax.features.attention_map import (
    AttentionMap,
    check_layer_head,
    layout_tokens,
    pick_head,
)
from bert_jax.features.extract import (
    check_layer_indexes,
    featurize,
    read_examples,
    run_batches,
    write_features,
)
from bert_jax.features.taps import run_with_taps
from bert_jax.model.attention_core import AttentionMask, attention_scores
from bert_jax.tokenization.directory import check_vocab_fits, open_tokenizer, tokenizer_file_in


def load_modernbert(
    model_dir: str | os.PathLike, do_lower_case: bool | None = None, dtype: str = "float32"
) -> tuple[ModernBertConfig, dict, object]:
    """(config with unscanned layers, encoder params, tokenizer) of a ModernBERT directory."""
    d = epath.Path(model_dir)
    if (d / "checkpoints").is_dir():
        raise BertJaxError(
            f"{d}: a ModernBERT workdir; features and attention maps read a Hugging Face "
            f"directory: bert-jax convert --init_checkpoint={d} --output_dir={d}_hf, then pass "
            f"{d}_hf"
        )
    vocab = tokenizer_file_in(d)
    if vocab is None:
        raise BertJaxError(f"{d}: no tokenizer.json (ModernBERT's tokenizer) in the directory")
    config, params, _ = modernbert_hf.load_hf_dir(
        d, dtype=dtype, scan_layers=False, remat_policy="none", attention_implementation="xla"
    )
    tokenizer = open_tokenizer(vocab, do_lower_case, "--do_lower_case", hf.guess_do_lower_case(d))
    check_vocab_fits(tokenizer, config.vocab_size, d)
    return config, params[ENCODER_SCOPE], tokenizer


def extract_modernbert_to_file(
    model_dir: str | os.PathLike,
    input_file: str | os.PathLike,
    output_file: str | os.PathLike,
    layer_indexes: Sequence[int] = (-1, -2, -3, -4),
    max_seq_length: int = 128,
    batch_size: int = 32,
    do_lower_case: bool | None = None,
    dtype: str = "float32",
) -> int:
    """The reference's JSON lines of a ModernBERT directory's hidden states; the example count."""
    config, params, tokenizer = load_modernbert(model_dir, do_lower_case, dtype)
    if max_seq_length > config.max_position_embeddings:
        raise BertJaxError(
            f"--max_seq_length {max_seq_length} > max_position_embeddings "
            f"{config.max_position_embeddings} of the model"
        )
    check_layer_indexes(layer_indexes, config.num_hidden_layers)
    features = featurize(read_examples(input_file), max_seq_length, tokenizer)
    model = ModernBertModel(config)

    @jax.jit
    def run(p, ids, mask, seg):
        del seg  # ModernBERT has no token types
        out = model.apply({"params": p}, ids, mask, output_hidden_states=True)
        layers = out.hidden_states[1:]  # index -1 is the last layer
        return jnp.stack([layers[i].astype(jnp.float32) for i in layer_indexes], axis=1)

    return write_features(output_file, run_batches(run, params, features, batch_size),
                          layer_indexes)  # fmt: skip


def layer_kind(config: ModernBertConfig, layer: int) -> str:
    """How layer `layer` attends, as the map's title says it."""
    if config.is_global(layer):
        return "global"
    return f"sliding window of {config.local_attention}"


def modernbert_attention(
    config: ModernBertConfig, params: dict, tokenizer, text_a: str, text_b: str | None
) -> tuple[list[str], np.ndarray]:
    """(tokens, N x H x L x L float32): every layer's probabilities, rows = queries."""
    tokens, _ = layout_tokens(tokenizer, text_a, text_b)
    if len(tokens) > config.max_position_embeddings:
        raise BertJaxError(
            f"--text: {len(tokens)} tokens with the special tokens (and --text_b) > "
            f"max_position_embeddings {config.max_position_embeddings} of the model; shorten it"
        )
    ids_1xL = np.asarray([tokenizer.convert_tokens_to_ids(tokens)], np.int32)
    model = ModernBertModel(config)

    @jax.jit
    def run(p, ids):
        _, seen = run_with_taps(model, p, lambda path: path[-1:] == ("Wqkv",), ids)
        positions_1xL = jnp.arange(ids.shape[1])[None]
        whole = AttentionMask(valid_BxL=jnp.ones(ids.shape, bool))
        probs = []
        for i in range(config.num_hidden_layers):
            qkv_1xLx3xHxK = seen[(f"layer_{i}", "attn", "Wqkv")][0]
            glob = config.is_global(i)
            theta = config.global_rope_theta if glob else config.local_rope_theta
            mask = whole if glob else whole.with_window(config.local_attention)
            cos, sin = rotary(positions_1xL, config.head_dim, theta)
            q, k = (rotate(qkv_1xLx3xHxK[:, :, j], cos, sin) for j in (0, 1))
            probs.append(jax.nn.softmax(attention_scores(q, k, mask), axis=-1)[0])
        return jnp.stack(probs)

    return tokens, np.asarray(run(params, ids_1xL), np.float32)


# ---- the reader `bert_jax.runs.features` calls (this family's `features_reader`) ------------
UNREAD = ("bert_config_file", "vocab_file")  # the directory holds its own


def extract(run, lower, dtype, bert_config_file, vocab_file) -> int:
    return extract_modernbert_to_file(*run, lower, dtype)


def attention_map(path, text, text_b, layer, head, lower, bert_config_file, vocab_file,
                  kind) -> AttentionMap:  # fmt: skip
    config, params, tokenizer = load_modernbert(path, lower)
    n, h = config.num_hidden_layers, config.num_attention_heads
    layer = check_layer_head(layer, head, n, h, "the model")
    tokens, probs_NxHxLxL = modernbert_attention(config, params, tokenizer, text, text_b)
    probs, label = pick_head(probs_NxHxLxL[layer], head)
    return AttentionMap(tokens, tokens, probs, layer, f"{label}, {layer_kind(config, layer)}")
