"""Our Flax BERT gives transformers' (PyTorch, CPU) numbers on identical weights: every layer's
hidden states, attention probabilities, the pooled output, MLM logits at masked positions and NSP
logits, for a random non-square BertForPreTraining and for the real pretrained MiniLM."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import transformers

from bert_jax.arch.bert.heads import BertForPreTraining
from bert_jax.arch.bert.model import BertModel
from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.model.scan import stack_layers

ATOL = 1e-5  # float32 vs PyTorch: measured max differences 1e-6 .. 6e-6 (README)


def random_inputs(vocab_size: int, batch: int = 2, seq_len: int = 16, seed: int = 0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(5, vocab_size, (batch, seq_len))
    mask = np.ones_like(ids)
    mask[1, seq_len - 5 :] = 0  # the second row is padded
    seg = np.zeros_like(ids)
    seg[:, seq_len // 2 :] = 1
    positions = np.stack([rng.choice(seq_len - 5, 4, replace=False) for _ in range(batch)])
    return ids, mask, seg, positions


def torch_outputs(model, ids, mask, seg):
    with torch.no_grad():
        return model(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask),
            token_type_ids=torch.tensor(seg),
            output_hidden_states=True,
            output_attentions=True,
        )


def max_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))


@pytest.fixture(scope="module")
def random_hf(tmp_path_factory):
    """A randomly initialised non-square BertForPreTraining (every weight perturbed, so biases
    and LayerNorms are not trivially 0/1) saved with save_pretrained (safetensors)."""
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=1000,
        hidden_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=200,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    model = transformers.BertForPreTraining(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    path = tmp_path_factory.mktemp("random_hf")
    model.save_pretrained(path)
    return path, model


@pytest.mark.parametrize("scan_layers", [False, True])
def test_random_pretraining_model_matches_transformers(random_hf, scan_layers):
    path, torch_model = random_hf
    pre = load_pretrained(path)
    assert pre.heads == ("pooler", "mlm", "nsp")
    ids, mask, seg, positions = random_inputs(1000)
    config = pre.config.replace(scan_layers=scan_layers)
    params = stack_layers(pre.params) if scan_layers else pre.params
    ours = BertForPreTraining(config).apply(
        {"params": params}, ids, mask, seg, positions, output_hidden_states=True,
        output_attentions=True,
    )  # fmt: skip
    theirs = torch_outputs(torch_model, ids, mask, seg)
    assert len(ours.encoder.hidden_states) == 4
    for a, b in zip(ours.encoder.hidden_states, theirs.hidden_states, strict=True):
        assert max_diff(a, b.numpy()) <= ATOL
    for a, b in zip(ours.encoder.attentions, theirs.attentions, strict=True):
        assert max_diff(a, b.numpy()) <= ATOL
    # transformers' BertForPreTraining does not return the pooled output; its bert submodule does
    with torch.no_grad():
        pooled = torch_model.bert(
            torch.tensor(ids), torch.tensor(mask), torch.tensor(seg)
        ).pooler_output.numpy()
    assert max_diff(ours.encoder.pooled_output, pooled) <= ATOL
    mlm = np.take_along_axis(theirs.prediction_logits.numpy(), positions[..., None], axis=1)
    assert ours.mlm_logits.shape == (2, 4, 1000)
    assert max_diff(ours.mlm_logits, mlm) <= ATOL
    assert max_diff(ours.nsp_logits, theirs.seq_relationship_logits.numpy()) <= ATOL


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    model = transformers.BertModel.from_pretrained(minilm_dir, attn_implementation="eager").eval()
    return load_pretrained(minilm_dir), model


@pytest.mark.parametrize("scan_layers", [False, True])
def test_real_minilm_matches_transformers(minilm, scan_layers):
    pre, torch_model = minilm
    assert pre.heads == ("pooler",) and pre.config.num_hidden_layers == 6
    ids, mask, seg, _ = random_inputs(pre.config.vocab_size, seq_len=24, seed=1)
    config = pre.config.replace(scan_layers=scan_layers)
    params = stack_layers(pre.params) if scan_layers else pre.params
    ours = BertModel(config).apply(
        {"params": params["bert"]}, ids, mask, seg, output_hidden_states=True,
        output_attentions=True,
    )  # fmt: skip
    theirs = torch_outputs(torch_model, ids, mask, seg)
    diffs = [
        max_diff(a, b.numpy())
        for a, b in zip(ours.hidden_states, theirs.hidden_states, strict=True)
    ]
    assert len(diffs) == 7 and max(diffs) <= ATOL, diffs
    for a, b in zip(ours.attentions, theirs.attentions, strict=True):
        assert max_diff(a, b.numpy()) <= ATOL
    assert max_diff(ours.pooled_output, theirs.pooler_output.numpy()) <= ATOL


def test_bfloat16_compute_stays_close_to_float32(minilm):
    """Parameters stay float32; only activations are bfloat16 (softmax and LayerNorm statistics
    in float32). Measured on MiniLM: last-layer max abs diff 0.038 where |values| reach 5.7
    (0.7%), mean abs diff 0.003, per-token cosine >= 0.99988."""
    pre, _ = minilm
    ids, mask, seg, _ = random_inputs(pre.config.vocab_size, seq_len=24, seed=2)
    outs = {}
    for dtype in ("float32", "bfloat16"):
        out = BertModel(pre.config.replace(dtype=dtype)).apply(
            {"params": pre.params["bert"]}, ids, mask, seg
        )
        outs[dtype] = np.asarray(out.sequence_output, np.float32)
    f32, bf16 = outs["float32"], outs["bfloat16"]
    valid = mask.astype(bool)
    diff = np.abs(f32 - bf16)[valid]
    cos = np.sum(f32 * bf16, -1) / (np.linalg.norm(f32, axis=-1) * np.linalg.norm(bf16, axis=-1))
    print(f"bf16 vs f32: max abs {diff.max():.4f}, mean abs {diff.mean():.5f}, "
          f"scale {np.abs(f32).max():.2f}, min cosine {cos[valid].min():.6f}")  # fmt: skip
    assert cos[valid].min() > 0.999
    assert diff.max() <= 0.012 * np.abs(f32).max()


def _grads_by_dtype(make, params, forward, probe):
    """Gradients of sum(output @ probe) with respect to `params`, the module `make(dtype)` at
    float32 and at bfloat16 compute (`forward(module, params)` gives its output)."""
    import jax

    grads = {}
    for dtype in ("float32", "bfloat16"):
        module = make(dtype)

        def score(p, module=module):
            return (forward(module, p).astype(np.float32) @ probe).sum()

        grads[dtype] = jax.grad(score)(params)
    return grads


def _relative_error(grads: dict, *path: str) -> float:
    """|g_bf16 - g_f32| / |g_f32| of the leaf at `path` of both gradient trees."""
    f32, bf16 = (np.asarray(functools.reduce(dict.get, path, grads[d])) for d in grads)
    return float(np.linalg.norm(bf16 - f32) / np.linalg.norm(f32))


def test_bfloat16_embedding_gradients_sum_in_float32(minilm):
    """Under bfloat16 compute the tables' gradients still sum in float32. Each of segment 0's
    2048 tokens here adds into one row, as does each occurrence of a frequent word; summed in
    bfloat16 (flax's nn.Embed casts the table, so its scatter-add is bfloat16) those rows lost
    several percent. Gradients through the embedding layer alone, MiniLM's tables, against
    float32 compute: LayerNorm's own gradient shows what the bfloat16 output alone costs.
    Measured on CPU: with flax's bfloat16 lookup 30% (words) and 81% (token types) relative
    error; with ours 0.18% each, LayerNorm's 0.09%."""
    from bert_jax.model.embeddings import BertEmbeddings

    pre, _ = minilm
    _, mask, seg, _ = random_inputs(pre.config.vocab_size, batch=32, seq_len=128, seed=4)
    # Eight frequent words fill the batch: each of their rows sums about 500 terms.
    ids = np.random.RandomState(4).choice([1996, 1010, 1012, 1997, 1998, 2000, 1037, 1999],
                                          size=mask.shape)  # fmt: skip
    probe = np.random.RandomState(0).normal(size=(pre.config.hidden_size,)).astype(np.float32)
    grads = _grads_by_dtype(
        lambda dtype: BertEmbeddings(pre.config.replace(dtype=dtype)),
        pre.params["bert"]["embeddings"],
        lambda layer, p: layer.apply({"params": p}, ids, seg, mask, deterministic=True),
        probe,
    )
    errors = {name: _relative_error(grads, name, leaf)
              for name, leaf in (("word_embeddings", "embedding"),
                                 ("token_type_embeddings", "embedding"),
                                 ("layer_norm", "scale"))}  # fmt: skip
    print({k: round(v, 5) for k, v in errors.items()})
    assert errors["layer_norm"] > 1e-5  # bfloat16 really ran
    assert errors["token_type_embeddings"] < 2 * errors["layer_norm"] + 1e-3, errors
    assert errors["word_embeddings"] < 2 * errors["layer_norm"] + 1e-3, errors


def test_bfloat16_bias_gradients_sum_in_float32(minilm):
    """A dense layer's bias gradient sums its output's gradient over every token; under
    bfloat16 compute that sum is in float32 (flax adds a bfloat16 copy of the bias, so it was a
    bfloat16 reduction). Against float32 compute through the whole encoder, each bias's error is
    of the order of its own kernel's (what bfloat16 activations cost). Measured on CPU: with
    flax's bias add, biases 4.3-12% vs kernels 0.6-0.8%; with ours, biases 0.5-0.7%."""
    pre, _ = minilm
    ids, mask, seg, _ = random_inputs(pre.config.vocab_size, batch=16, seq_len=64, seed=5)
    probe = np.random.RandomState(1).normal(size=(pre.config.hidden_size,)).astype(np.float32)
    grads = _grads_by_dtype(
        lambda dtype: BertModel(pre.config.replace(dtype=dtype)),
        pre.params["bert"],
        lambda model, p: model.apply({"params": p}, ids, mask, seg).sequence_output,
        probe,
    )
    layers = [("attention", "value"), ("attention", "output"), ("intermediate",), ("output",)]
    errors = {"/".join(p): (_relative_error(grads, "encoder", "layer_0", *p, "bias"),
                            _relative_error(grads, "encoder", "layer_0", *p, "kernel"))
              for p in layers}  # fmt: skip
    print({k: (round(b, 4), round(k_, 4)) for k, (b, k_) in errors.items()})
    for name, (bias, kernel) in errors.items():
        assert kernel > 1e-4, name  # bfloat16 really ran
        assert bias < 2 * kernel + 2e-3, (name, errors)


def test_masked_lm_layout_matches_transformers(tmp_path):
    """BertForMaskedLM checkpoints (here sharded): no pooler, no NSP head -> use_nsp=False."""
    torch.manual_seed(3)
    config = transformers.BertConfig(
        vocab_size=1000, hidden_size=96, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=200, max_position_embeddings=64, hidden_act="gelu_new",
    )  # fmt: skip
    model = transformers.BertForMaskedLM(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(tmp_path, max_shard_size="300KB")  # sharded, with an index.json
    assert len(list(tmp_path.glob("model-*.safetensors"))) > 1
    pre = load_pretrained(tmp_path)
    assert pre.heads == ("mlm",) and pre.config.gelu_approximate
    ids, mask, seg, positions = random_inputs(1000, seed=4)
    ours = BertForPreTraining(pre.config, use_nsp=False).apply(
        {"params": pre.params}, ids, mask, seg, positions
    )
    with torch.no_grad():
        logits = model(torch.tensor(ids), torch.tensor(mask), torch.tensor(seg)).logits.numpy()
    assert ours.nsp_logits is None
    assert max_diff(ours.mlm_logits, np.take_along_axis(logits, positions[..., None], 1)) <= ATOL
