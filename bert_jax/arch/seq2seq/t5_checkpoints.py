"""Hugging Face T5 directories (T5ForConditionalGeneration: config.json + model.safetensors, and
spiece.model when present) in and out of the encoder-decoder family, never unpickling.

v1.0 vs v1.1 is read from the directory, not guessed from a name: the LM head is untied when the
file holds its own `lm_head.weight`; the d_model**-0.5 output rescale follows
`scale_decoder_outputs` (transformers >= 5) or else `tie_word_embeddings` (older configs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import numpy as np
from etils import epath

from bert_jax.arch.bert.hf import _open_weights
from bert_jax.arch.seq2seq.config import Seq2SeqConfig
from bert_jax.arch.seq2seq.scan import unstack_seq2seq
from bert_jax.atomic_write import write_bytes_atomic, write_json_atomic
from bert_jax.errors import BertJaxError

_HF_FIELDS = ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers",
              "num_heads", "relative_attention_num_buckets", "relative_attention_max_distance",
              "dropout_rate", "layer_norm_epsilon", "feed_forward_proj", "pad_token_id",
              "eos_token_id", "decoder_start_token_id")  # fmt: skip


def config_from_hf(raw: dict, source: str, has_lm_head: bool) -> Seq2SeqConfig:
    if raw.get("model_type") != "t5":
        raise BertJaxError(f"{source}: model_type {raw.get('model_type')!r} is not t5")
    known = {k: raw[k] for k in _HF_FIELDS if raw.get(k) is not None}
    if "num_decoder_layers" not in known and "num_layers" in known:
        known["num_decoder_layers"] = known["num_layers"]
    if isinstance(known.get("eos_token_id"), list):
        known["eos_token_id"] = known["eos_token_id"][0]
    scale = raw.get("scale_decoder_outputs", raw.get("tie_word_embeddings", True) is not False)
    try:
        return Seq2SeqConfig(**known, tie_word_embeddings=not has_lm_head,
                             scale_decoder_outputs=bool(scale), family="t5")  # fmt: skip
    except TypeError as e:
        raise BertJaxError(f"{source}: {e}") from None


# (HF name, our path, kind); kind says how an HF [out, in] matrix becomes our kernel.
def _names(cfg: Seq2SeqConfig) -> Iterator[tuple[str, tuple[str, ...], str]]:
    yield "shared.weight", ("shared", "embedding"), "copy"
    mlp = ("wi_0", "wi_1", "wo") if cfg.gated else ("wi", "wo")
    for stack, n in (("encoder", cfg.num_layers), ("decoder", cfg.num_decoder_layers)):
        yield (f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
               (stack, "relative_attention_bias", "embedding"), "copy")  # fmt: skip
        for i in range(n):
            hf, ours = f"{stack}.block.{i}.layer.", (stack, f"layer_{i}")
            parts = [("0.SelfAttention", "self_attention", "0.layer_norm", "self_attention_norm")]
            if stack == "decoder":
                parts.append(("1.EncDecAttention", "cross_attention", "1.layer_norm",
                              "cross_attention_norm"))  # fmt: skip
            for hf_attn, attn, hf_norm, our_norm in parts:
                for h, o in (("q", "query"), ("k", "key"), ("v", "value")):
                    yield f"{hf}{hf_attn}.{h}.weight", (*ours, attn, o, "kernel"), "in_heads"
                yield f"{hf}{hf_attn}.o.weight", (*ours, attn, "out", "kernel"), "out_heads"
                yield f"{hf}{hf_norm}.weight", (*ours, our_norm, "scale"), "copy"
            j = len(parts)
            for w in mlp:
                yield f"{hf}{j}.DenseReluDense.{w}.weight", (*ours, "mlp", w, "kernel"), "T"
            yield f"{hf}{j}.layer_norm.weight", (*ours, "mlp_norm", "scale"), "copy"
        yield f"{stack}.final_layer_norm.weight", (stack, "final_norm", "scale"), "copy"
    if not cfg.tie_word_embeddings:
        yield "lm_head.weight", ("lm_head", "kernel"), "T"


def _to_ours(x: np.ndarray, kind: str, cfg: Seq2SeqConfig) -> np.ndarray:
    if kind == "T":
        return x.T
    if kind == "in_heads":  # [H*K, D] -> [D, H, K]
        return x.T.reshape(cfg.d_model, cfg.num_heads, cfg.d_kv)
    if kind == "out_heads":  # [D, H*K] -> [H, K, D]
        return x.T.reshape(cfg.num_heads, cfg.d_kv, cfg.d_model)
    return x


def _to_hf(x: np.ndarray, kind: str) -> np.ndarray:
    if kind == "T":
        return x.T
    if kind == "in_heads":
        return x.reshape(x.shape[0], -1).T
    if kind == "out_heads":
        return x.reshape(-1, x.shape[-1]).T
    return x


def _set(tree: dict, path: tuple[str, ...], value) -> None:
    for p in path[:-1]:
        tree = tree.setdefault(p, {})
    tree[path[-1]] = value


def read_t5_dir(path: epath.PathLike) -> tuple[Seq2SeqConfig, dict]:
    """(config, looped params) from a transformers T5ForConditionalGeneration directory."""
    path = epath.Path(path)
    source, shapes, read = _open_weights(path)
    config_file = path / "config.json"
    try:
        raw = json.loads(config_file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise BertJaxError(f"{config_file}: cannot read ({e})") from None
    has_head = "lm_head.weight" in shapes
    if has_head and np.array_equal(read("lm_head.weight"), read("shared.weight")):
        has_head = False  # a tied head saved twice
    cfg = config_from_hf(raw, str(config_file), has_head)
    params: dict = {}
    for hf_name, ours, kind in _names(cfg):
        if hf_name not in shapes:
            raise BertJaxError(f"{source}: missing {hf_name} (config {config_file})")
        _set(params, ours, _to_ours(read(hf_name), kind, cfg))
    return cfg, params


def check_t5_layout(cfg: Seq2SeqConfig, source: str | os.PathLike) -> None:
    """transformers' T5 classes hold only T5's layout; name what differs."""
    wanted = {"family": "t5", "position": "relative", "norm": "rms_pre", "use_bias": False}
    differ = [f"{k}={getattr(cfg, k)!r}" for k, v in wanted.items() if getattr(cfg, k) != v]
    if differ:
        raise BertJaxError(
            f"{source}: transformers has no class for this encoder-decoder ({', '.join(differ)});"
            " only T5's layout (family 't5': relative positions, RMS pre-norm, no biases) exports"
        )


def export_t5(
    cfg: Seq2SeqConfig, params: dict, output_dir: str | os.PathLike,
    spm_model: str | os.PathLike | None = None, source: str | os.PathLike = "export_t5",
) -> epath.Path:  # fmt: skip
    """Write a directory transformers' T5ForConditionalGeneration loads (config.json last)."""
    from safetensors.numpy import save

    check_t5_layout(cfg, source)
    params = unstack_seq2seq(params)
    params = params.get("params", params)
    tensors = {}
    for hf_name, ours, kind in _names(cfg):
        node = params
        try:
            for p in ours:
                node = node[p]
        except KeyError:
            raise BertJaxError(f"export_t5: parameters have no {'/'.join(ours)}") from None
        tensors[hf_name] = np.ascontiguousarray(_to_hf(np.asarray(node, np.float32), kind))
    if cfg.tie_word_embeddings and not cfg.scale_decoder_outputs:
        # transformers reads "tied" as "rescaled" from older configs; a tied head without the
        # rescale is written as an explicit (equal) head with tie_word_embeddings=false.
        tensors["lm_head.weight"] = tensors["shared.weight"].copy()
    hf = {k: getattr(cfg, k) for k in _HF_FIELDS}
    hf.update(
        architectures=["T5ForConditionalGeneration"], model_type="t5", is_encoder_decoder=True,
        tie_word_embeddings=cfg.scale_decoder_outputs,
        scale_decoder_outputs=cfg.scale_decoder_outputs,
        dense_act_fn="gelu_new" if cfg.feed_forward_proj == "gated-gelu"
        else cfg.feed_forward_proj.removeprefix("gated-"),
        is_gated_act=cfg.gated,
    )  # fmt: skip
    out = epath.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(out / "model.safetensors", save(tensors, metadata={"format": "pt"}))
    if spm_model is not None:  # with the tokenizer.json / tokenizer_config.json beside it
        from bert_jax.tokenization.directory import TOKENIZER_CONFIG, tokenizer_file_set

        files = tokenizer_file_set(spm_model)
        for name, src in files.items():
            write_bytes_atomic(out / name, src.read_bytes())
        if TOKENIZER_CONFIG not in files:
            write_json_atomic(out / TOKENIZER_CONFIG, {"tokenizer_class": "T5Tokenizer",
                                                       "extra_ids": 100})  # fmt: skip
    write_json_atomic(out / "config.json", hf, sort_keys=True)
    return out
