"""ModernBERT against transformers' PyTorch ModernBert* on identical random weights: every
layer's hidden states and every head's logits <= 1e-5 (float32), in the padded layout (rows with
different padding) and the packed one (three sequences in one row against each run alone), with
sequences longer than the local window so that both kinds of layer matter; the training path
(attention dropout on) too. Then directories: our exports load in transformers, and bad ones
(missing or misshapen tensor, bad config values, missing file) are named."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.arch import modernbert as mb
from bert_jax.arch.modernbert import hf as modernbert_hf
from bert_jax.errors import BertJaxError

LENGTH, VOCAB, TOL = 24, 100, 1e-5
HEADS = {
    "ModernBertForMaskedLM": {},
    "ModernBertForSequenceClassification": {"num_labels": 3},
    "ModernBertForTokenClassification": {"num_labels": 4},
    "ModernBertForQuestionAnswering": {},
    "ModernBertForMultipleChoice": {},
}


def _hf_config(**kw):
    import transformers

    return transformers.ModernBertConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
        num_attention_heads=2, local_attention=8, max_position_embeddings=64, pad_token_id=0,
        cls_token_id=1, sep_token_id=2, bos_token_id=1, eos_token_id=2,
        attn_implementation="eager", **kw,
    )  # fmt: skip


def _torch_model(architecture: str, **kw):
    """A transformers model with every parameter (norm scales too) moved off its init; one per
    head kind and settings in this module (tests read it, never change it)."""
    return _build_torch_model(architecture, tuple(sorted(kw.items())))


@functools.cache
def _build_torch_model(architecture: str, kw: tuple):
    import torch
    import transformers

    torch.manual_seed(0)
    model = getattr(transformers, architecture)(_hf_config(**dict(kw))).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def _ours(model, architecture: str, **kw):
    config = mb.ModernBertConfig.from_hf_dict(model.config.to_dict(), "hf", **kw)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    labels = model.config.num_labels
    return config, modernbert_hf.params_from_state_dict(state, config, architecture, "hf", labels)


def _rows(n: int = 3, seed: int = 0, left: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Rows of 24, 17 and 11 real tokens starting with [CLS], padded on the right (or left)."""
    rs = np.random.RandomState(seed)
    ids = rs.randint(3, VOCAB, size=(n, LENGTH))
    mask = np.ones_like(ids)
    for row, real in enumerate([LENGTH, 17, 11][:n]):
        pad = slice(0, LENGTH - real) if left else slice(real, None)
        mask[row, pad] = 0
        ids[row, pad] = 0
        ids[row, LENGTH - real if left else 0] = 1
    return ids, mask


def _close(ours, theirs, where=None) -> None:
    diff = np.abs(np.asarray(ours, np.float64) - np.asarray(theirs, np.float64))
    assert (diff[where] if where is not None else diff).max() <= TOL


@pytest.mark.parametrize("scan", [False, True])
def test_every_hidden_state_and_the_mlm_logits_padded(scan):
    import torch

    hf = _torch_model("ModernBertForMaskedLM")
    config, params = _ours(hf, "ModernBertForMaskedLM")
    ids, mask = _rows()
    with torch.no_grad():
        ref = hf(torch.tensor(ids), attention_mask=torch.tensor(mask), output_hidden_states=True)
    real = mask.astype(bool)
    if scan:  # the scanned layout (rematerialised): the same weights, layers 1..N-1 stacked
        config, params = config.replace(scan_layers=True, remat_policy="full"), _scanned(params)
    enc = mb.ModernBertModel(config).apply(
        {"params": params["model"]}, jnp.asarray(ids), jnp.asarray(mask), output_hidden_states=True
    )
    assert len(enc.hidden_states) == len(ref.hidden_states) == 5
    for ours, theirs in zip(enc.hidden_states, ref.hidden_states, strict=True):
        _close(ours, theirs.numpy(), real)
    logits = mb.ModernBertForMaskedLM(config).apply({"params": params}, ids, mask)
    _close(logits, ref.logits.numpy(), real)
    if scan:  # and the converter reads the scanned layout back to transformers' names
        state = modernbert_hf.hf_state_dict(params, config)
        assert np.allclose(state["model.layers.2.mlp.Wi.weight"], hf.state_dict()[
            "model.layers.2.mlp.Wi.weight"].numpy())  # fmt: skip


def test_training_attention_path_equals_transformers_at_negligible_dropout():
    """With dropout on, attention runs through attention_scores + softmax + dropout instead of
    attend(); at a rate of 1e-7 nothing is dropped, so it must still equal transformers (eval).
    Scanned, so that each layer's kind is chosen inside lax.cond as in pretraining."""
    import torch

    hf = _torch_model("ModernBertForMaskedLM")
    config, params = _ours(hf, "ModernBertForMaskedLM")
    config = config.replace(attention_dropout=1e-7)
    ids, mask = _rows()
    with torch.no_grad():
        ref = hf(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
    real = mask.astype(bool)
    rngs = {"dropout": jax.random.PRNGKey(0)}
    ours = mb.ModernBertForMaskedLM(config.replace(scan_layers=True)).apply(
        {"params": _scanned(params)}, ids, mask, deterministic=False, rngs=rngs
    )
    _close(ours, ref, real)


def _scanned(params):
    """The scanned layout of the same weights: layers 1..N-1 stacked under `layers`."""
    model = dict(params["model"])
    stacked = [model.pop(f"layer_{i}") for i in range(1, 4)]
    return {**params, "model": {**model, "layers": _stack(stacked)}}


def _stack(trees):
    return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *trees)


@pytest.mark.parametrize(
    "architecture,pooling,left",
    [(a, "mean", False) for a in HEADS] + [("ModernBertForMultipleChoice", "cls", True)],
)
def test_task_heads_padded(architecture, pooling, left):
    """Every head on right-padded rows (mean pooling); multiple choice also with cls pooling on
    left-padded rows, where transformers reads each choice's first real token."""
    import torch

    hf = _torch_model(architecture, classifier_pooling=pooling, **HEADS[architecture])
    config, params = _ours(hf, architecture)
    ids, mask = _rows(left=left)
    model = modernbert_hf.ARCHITECTURES[architecture]
    model = model(config, hf.config.num_labels) if "Classif" in architecture else model(config)
    if architecture.endswith("MultipleChoice"):  # 1 question x 3 choices
        choices = {"input_ids_BxCxL": ids[None], "input_mask_BxCxL": mask[None]}
        ours = model.apply({"params": params}, **choices)
        with torch.no_grad():
            ref = hf(torch.tensor(ids[None]), attention_mask=torch.tensor(mask[None])).logits
        return _close(ours, ref.numpy())
    ours = model.apply({"params": params}, ids, mask)
    with torch.no_grad():
        ref = hf(torch.tensor(ids), attention_mask=torch.tensor(mask))
    if architecture.endswith("QuestionAnswering"):
        real = mask.astype(bool)
        _close(ours[0], ref.start_logits.numpy(), real)
        return _close(ours[1], ref.end_logits.numpy(), real)
    real = mask.astype(bool) if architecture.endswith("TokenClassification") else None
    _close(ours, ref.logits.numpy(), real)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_packed_row_equals_each_sequence_alone(pooling):
    """Three sequences (10, 9 and 5 tokens) in one row of 24: per-token hidden states and MLM
    logits, and the classifier's per-sequence logits, equal transformers on each sequence."""
    import torch

    hf = _torch_model("ModernBertForSequenceClassification", classifier_pooling=pooling)
    config, params = _ours(hf, "ModernBertForSequenceClassification")
    rs = np.random.RandomState(1)
    lengths = (10, 9, 5)
    seqs = [np.concatenate([[1], rs.randint(3, VOCAB, n - 1)]) for n in lengths]
    ids = np.concatenate(seqs)[None]
    pack = np.concatenate([np.full(n, i + 1) for i, n in enumerate(lengths)])[None].astype(np.int32)
    enc = mb.ModernBertModel(config).apply(
        {"params": params["model"]}, ids, np.ones_like(ids), pack, output_hidden_states=True
    )
    head = mb.ModernBertForSequenceClassification(config, 2, max_sequences=4)
    logits_1xSx2 = head.apply({"params": params}, ids, np.ones_like(ids), None, pack)
    start = 0
    for s, seq in enumerate(seqs):
        with torch.no_grad():
            ref = hf(torch.tensor(seq[None]), output_hidden_states=True)
        for ours, theirs in zip(enc.hidden_states, ref.hidden_states, strict=True):
            _close(ours[0, start : start + len(seq)], theirs[0].numpy())
        _close(logits_1xSx2[0, s], ref.logits[0].numpy())
        start += len(seq)


def test_export_loads_in_transformers(tmp_path):
    """Our MLM and a 3-label classifier (no label names given) written as Hugging Face
    directories: transformers' Auto classes load them and compute our logits; our loader reads
    back the same config and weights."""
    import torch
    import transformers

    ids, mask = _rows()
    real = mask.astype(bool)
    cases = [
        ("ModernBertForMaskedLM", {}, transformers.AutoModelForMaskedLM),
        ("ModernBertForSequenceClassification",
         {"classifier_pooling": "mean", "num_labels": 3},
         transformers.AutoModelForSequenceClassification),
    ]  # fmt: skip
    for architecture, kw, auto in cases:
        config, params = _ours(_torch_model(architecture, **kw), architecture)
        out = modernbert_hf.export_hf_dir(params, config, tmp_path / architecture, architecture)
        loaded = auto.from_pretrained(out, attn_implementation="eager").eval()
        with torch.no_grad():
            theirs = loaded(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
        build = modernbert_hf.ARCHITECTURES[architecture]
        model = build(config, 3) if "Classification" in architecture else build(config)
        _close(model.apply({"params": params}, ids, mask), theirs, real if kw == {} else None)
        config2, params2, arch = modernbert_hf.load_hf_dir(out)
        assert arch == architecture and config2 == config
        jax.tree_util.tree_map(np.testing.assert_array_equal, params2, params)


def test_bad_directories_are_named(tmp_path):
    from safetensors.numpy import load_file, save_file

    config, params = _ours(_torch_model("ModernBertForMaskedLM"), "ModernBertForMaskedLM")
    out = modernbert_hf.export_hf_dir(params, config, tmp_path / "hf", "ModernBertForMaskedLM")
    weights, config_json = out / "model.safetensors", out / "config.json"
    good_state, good_config = load_file(weights), json.loads(config_json.read_text())

    def fails(match: str, state=None, **config_changes) -> None:
        save_file(state if state is not None else good_state, weights)
        config_json.write_text(json.dumps(good_config | config_changes))
        with pytest.raises(BertJaxError, match=match):
            modernbert_hf.load_hf_dir(out)

    fails(
        r"model.safetensors: has no tensor model.layers.1.attn.Wqkv.weight",
        {k: v for k, v in good_state.items() if k != "model.layers.1.attn.Wqkv.weight"},
    )
    wrong = good_state | {"model.layers.2.mlp.Wo.weight": np.zeros((48, 32), np.float32)}
    fails(r"model.safetensors: model.layers.2.mlp.Wo.weight has shape \(48, 32\), expected "
          r"\(32, 48\)", wrong)  # fmt: skip
    fails(
        r"config.json: layer_types .* is not a global layer every n",
        layer_types=["sliding_attention"] * 4,
    )
    fails(
        r"config.json: layer_types has 3 entries for num_hidden_layers 4",
        layer_types=["full_attention", "sliding_attention", "sliding_attention"],
    )
    fails(r"config.json: model_type 'bert' is not modernbert", model_type="bert")
    fails(r"config.json: ModernBertConfig hidden_activation='swish'", hidden_activation="swish")
    fails(r"config.json: rope_scaling .* is unsupported", rope_scaling={"rope_type": "yarn"})
    weights.unlink()
    with pytest.raises(BertJaxError, match=r"model.safetensors: no such file"):
        modernbert_hf.load_hf_dir(out)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_rotary_by_matmul_equals_the_swap(dtype):
    # the TPU path (a permutation matmul) against the one the tests above check against
    # transformers on CPU: the same values and gradients up to rounding (XLA contracts
    # x cos + swapped sin into fused multiply-adds differently in the two programs)
    from bert_jax.arch.modernbert.model import rotary, rotate

    x = jax.random.normal(jax.random.PRNGKey(0), (2, 40, 3, 16), jnp.float32).astype(dtype)
    cos, sin = rotary(jnp.broadcast_to(jnp.arange(40), (2, 40)), 16, 10_000.0)

    def run(by_matmul):
        def loss(x):
            y = rotate(x, cos, sin, by_matmul=by_matmul)
            return jnp.sum(jnp.sin(y.astype(jnp.float32))), y

        (_, y), g = jax.jit(jax.value_and_grad(loss, has_aux=True))(x)
        return np.asarray(y.astype(jnp.float32)), np.asarray(g.astype(jnp.float32))

    (y_swap, g_swap), (y_matmul, g_matmul) = run(False), run(True)
    # bfloat16: a float32 rounding can move an output by an ulp, and the matmul's backward rounds
    # its cotangent to bfloat16 before the swap, where the concatenate swaps in float32
    # (terms of size about 1 that can cancel: a rounding of the terms, not of the result)
    rtol, atol = (0, 1e-6) if dtype == jnp.float32 else (2**-7, 2**-7)
    np.testing.assert_allclose(y_matmul, y_swap, rtol=rtol, atol=atol)
    np.testing.assert_allclose(g_matmul, g_swap, rtol=rtol, atol=atol)
    assert np.abs(y_swap - np.asarray(x.astype(jnp.float32))).max() > 0.1  # it rotated
