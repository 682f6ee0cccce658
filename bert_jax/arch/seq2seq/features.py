"""`extract-features` and `attention-map` for an encoder-decoder (a Hugging Face T5 directory or a
bert-jax seq2seq workdir, `bert_jax.arch.seq2seq.load`).

Features are the encoder's hidden states, as transformers' `encoder_hidden_states` (layer -1 after
the final norm) for one text per line: its sentencepiece pieces and </s>, padded with <pad>.

Maps (`--attention`): "encoder", the encoder's self-attention over the text; "cross", the decoder
attending over the encoder (rows: the decoder's inputs, columns: the text's tokens); "decoder",
the decoder's causal self-attention. The decoder reads the target text `--text_b` as in training
(teacher forcing): the start token <pad>, then the target's pieces. The probabilities are the
model's own softmax, tapped where its attention passes them to dropout (`bert_jax.features.taps`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.arch.seq2seq import EncoderDecoder, Seq2SeqConfig
from bert_jax.arch.seq2seq.load import load_seq2seq
from bert_jax.errors import BertJaxError
from bert_jax.features.attention_map import AttentionMap, check_layer_head, pick_head
from bert_jax.features.extract import (
    Features,
    check_layer_indexes,
    check_seq_length,
    read_examples,
    run_batches,
    write_features,
)
from bert_jax.features.taps import probabilities, run_with_taps
from bert_jax.tokenization.t5_vocab import T5Vocab

ATTENTION_KINDS = ("encoder", "cross", "decoder")


def load_t5(
    path: str | os.PathLike, vocab_file: str | None = None, dtype: str = "float32"
) -> tuple[Seq2SeqConfig, dict, T5Vocab]:
    """(config with looped layers, params, vocabulary) of a T5 directory or seq2seq workdir;
    `vocab_file` (a T5 spiece.model) stands in for a missing or different one."""
    pre = load_seq2seq(path)
    spm = vocab_file or pre.spm_model
    if not spm:
        raise BertJaxError(
            f"{path}: no spiece.model or tokenizer.json (T5's tokenizer); pass --vocab_file"
        )
    config = dataclasses.replace(pre.config, scan_layers=False, remat_policy="none", dtype=dtype)
    return config, pre.params, T5Vocab.for_model(spm, config.vocab_size)


def pieces(vocab: T5Vocab, ids: Sequence[int]) -> list[str]:
    """The tokens of `ids` as transformers' T5Tokenizer spells them."""
    return [
        f"<extra_id_{vocab.size - 1 - i}>" if vocab.is_sentinel(i) else vocab.sp.IdToPiece(i)
        for i in ids
    ]


def featurize(examples, seq_length: int, vocab: T5Vocab, source: str) -> list[Features]:
    """Each text's pieces (cut to leave room for </s>) and </s>, right-padded with <pad>."""
    check_seq_length(seq_length, 0, examples)
    out = []
    for ex in examples:
        if ex.text_b is not None:
            raise BertJaxError(
                f"{source}: line {ex.unique_id + 1} is a pair `a ||| b`; T5's encoder reads one "
                "text a line (write the pair as one text)"
            )
        ids = [*vocab.encode(ex.text_a, add_eos=False)[: seq_length - 1], vocab.eos_id]
        row = np.full(seq_length, vocab.pad_id, np.int32)
        row[: len(ids)] = ids
        mask = (np.arange(seq_length) < len(ids)).astype(np.int32)
        out.append(Features(ex.unique_id, pieces(vocab, ids), row, mask, np.zeros_like(row)))
    return out


def extract_t5_to_file(
    path: str | os.PathLike,
    input_file: str | os.PathLike,
    output_file: str | os.PathLike,
    layer_indexes: Sequence[int] = (-1, -2, -3, -4),
    max_seq_length: int = 128,
    batch_size: int = 32,
    vocab_file: str | None = None,
    dtype: str = "float32",
) -> int:
    """The reference's JSON lines of the encoder's hidden states; the number of examples."""
    config, params, vocab = load_t5(path, vocab_file, dtype)
    n = config.num_layers
    check_layer_indexes(layer_indexes, n)
    features = featurize(read_examples(input_file), max_seq_length, vocab, str(input_file))
    model = EncoderDecoder(config)
    layer_paths = [("encoder", f"layer_{i}") for i in range(n)]

    @jax.jit
    def run(p, ids, mask, seg):
        del seg
        top_BxSxD, seen = run_with_taps(model, p, layer_paths.__contains__, ids, mask,
                                        method=EncoderDecoder.encode)  # fmt: skip
        # transformers' last hidden state is after the final norm, the others each layer's own.
        layers = [seen[path][0][0] for path in layer_paths[:-1]] + [top_BxSxD]
        return jnp.stack([layers[i].astype(jnp.float32) for i in layer_indexes], axis=1)

    return write_features(output_file, run_batches(run, params, features, batch_size),
                          layer_indexes)  # fmt: skip


def check_attention_flags(kind: str, text_b: str | None) -> None:
    """The target text goes with the decoder's maps and only with them."""
    if kind not in ATTENTION_KINDS:
        raise BertJaxError(f"--attention={kind}: use one of {', '.join(ATTENTION_KINDS)}")
    if kind == "encoder" and text_b:
        raise BertJaxError(
            "--text_b: T5's encoder reads one text (--text); --text_b is the target text the "
            "decoder reads, for --attention=cross or --attention=decoder"
        )
    if kind != "encoder" and not text_b:
        raise BertJaxError(
            f"--attention={kind}: the decoder needs a target text; pass --text_b (e.g. "
            "--text_b='Das Haus ist klein.')"
        )


def t5_attention(
    config: Seq2SeqConfig, params: dict, vocab: T5Vocab, text: str, target: str | None,
    kind: str,
) -> tuple[list[str], list[str], np.ndarray]:  # fmt: skip
    """(query tokens, key tokens, N x H x Q x K float32) of every layer of the `kind` map."""
    check_attention_flags(kind, target)
    enc_ids = vocab.encode(text)
    ids_1xS = np.asarray([enc_ids], np.int32)
    mask_1xS = np.ones_like(ids_1xS)
    model = EncoderDecoder(config)
    if kind == "encoder":
        queries, keys, n = enc_ids, enc_ids, config.num_layers
        paths = [("encoder", f"layer_{i}", "self_attention", "Dropout_0") for i in range(n)]
        args, method = (ids_1xS, mask_1xS), EncoderDecoder.encode
    else:
        dec_ids = [config.decoder_start_token_id, *vocab.encode(target, add_eos=False)]
        block = "cross_attention" if kind == "cross" else "self_attention"
        queries, keys = dec_ids, (enc_ids if kind == "cross" else dec_ids)
        n = config.num_decoder_layers
        paths = [("decoder", f"layer_{i}", block, "Dropout_0") for i in range(n)]
        args, method = (ids_1xS, mask_1xS, np.asarray([dec_ids], np.int32)), None

    @jax.jit
    def run(p, *inputs):
        _, seen = run_with_taps(model, p, paths.__contains__, *inputs, method=method)
        return jnp.stack([probabilities(seen, path)[0] for path in paths])

    probs = np.asarray(run(params, *args), np.float32)
    return pieces(vocab, queries), pieces(vocab, keys), probs


# ---- the reader `bert_jax.runs.features` calls (this family's `features_reader`) ------------
UNREAD = ("bert_config_file", "do_lower_case")  # T5's sentencepiece keeps case


def extract(run, lower, dtype, bert_config_file, vocab_file) -> int:
    return extract_t5_to_file(*run, vocab_file, dtype)


def attention_map(path, text, text_b, layer, head, lower, bert_config_file, vocab_file,
                  kind) -> AttentionMap:  # fmt: skip
    check_attention_flags(kind, text_b)  # before the model is read
    config, params, vocab = load_t5(path, vocab_file)
    stack = "the encoder" if kind == "encoder" else "the decoder"
    n = config.num_layers if kind == "encoder" else config.num_decoder_layers
    layer = check_layer_head(layer, head, n, config.num_heads, stack)
    queries, keys, probs_NxHxQxK = t5_attention(config, params, vocab, text, text_b, kind)
    probs, label = pick_head(probs_NxHxQxK[layer], head)
    return AttentionMap(queries, keys, probs, layer, f"{label}, {kind} attention")
