"""XLNet against transformers' PyTorch XLNet on identical random weights: the content stream, the
query-stream LM logits (same perm_mask / target_mapping), segment recurrence (mems), and the
export read back by transformers."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
import torch

from bert_jax.arch.xlnet import XLNetLM
from bert_jax.arch.xlnet.checkpoints import export_xlnet, read_xlnet_dir

B, L, P, M = 2, 12, 3, 5


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    import transformers

    torch.manual_seed(0)
    cfg = transformers.XLNetConfig(
        vocab_size=97, d_model=32, n_layer=2, n_head=4, d_inner=64, mem_len=M, dropout=0.0
    )
    model = transformers.XLNetLMHeadModel(cfg).eval()
    with torch.no_grad():  # every weight random (HF initialises biases and LN to 0/1)
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    d = tmp_path_factory.mktemp("xlnet_hf")
    model.save_pretrained(d, safe_serialization=True)
    return d, model


def _inputs(seed: int):
    rs = np.random.RandomState(seed)
    ids = rs.randint(0, 97, size=(B, L))
    seg = (np.arange(L)[None] >= 5).astype(np.int64).repeat(B, 0)
    seg[:, -1] = 2  # XLNet's [CLS] segment
    mask = np.ones((B, L), np.int64)
    mask[1, :2] = 0  # left padding, as XLNet pads
    perm = (rs.rand(B, L, L) < 0.3).astype(np.float32)
    tm = np.zeros((B, P, L), np.float32)
    for b in range(B):
        tm[b, np.arange(P), rs.choice(L, P, replace=False)] = 1.0
    return ids, seg, mask, perm, tm


def _hf(model, ids, seg, mask, perm, tm, mems=None):
    t = lambda x, dt=torch.long: torch.tensor(x, dtype=dt)
    with torch.no_grad():
        out = model(
            input_ids=t(ids), token_type_ids=t(seg), attention_mask=t(mask, torch.float32),
            perm_mask=t(perm, torch.float32), target_mapping=t(tm, torch.float32), mems=mems,
            use_mems=True, output_hidden_states=True,
        )  # fmt: skip
    return out.logits.numpy(), out.hidden_states[-2].numpy(), out.mems


@functools.partial(jax.jit, static_argnums=0)
def _apply(cfg, params, *inputs):
    return XLNetLM(cfg).apply({"params": params}, *inputs, deterministic=True)


def _ours(cfg, params, ids, seg, mask, perm, tm, mems=None):
    logits, out = _apply(cfg, params, ids, seg, mask, perm, tm, mems)
    return np.asarray(logits), np.asarray(out.content_BxLxD), out.new_mems_NxBxMxD


def test_parity_two_streams_and_mems(hf_dir):
    path, model = hf_dir
    cfg, params, has_head = read_xlnet_dir(path)
    assert has_head and cfg.mem_len == M and cfg.d_head == 8
    mems_hf, mems_ours = None, None
    for seed in (0, 1):  # the second segment attends to the first through the memory
        x = _inputs(seed)
        lg_hf, h_hf, mems_hf = _hf(model, *x, mems=mems_hf)
        lg, h, mems_ours = _ours(cfg, params, *x, mems=mems_ours)
        assert lg.shape == (B, P, 97)
        np.testing.assert_allclose(h, h_hf, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(lg, lg_hf, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(
            np.asarray(mems_ours), np.stack([m.numpy() for m in mems_hf]).transpose(0, 2, 1, 3),
            atol=1e-5,
        )  # fmt: skip


def test_query_stream_cannot_see_its_own_token(hf_dir):
    """Changing the predicted token changes the content stream at that position but not the
    query stream's prediction of it (the point of two-stream attention)."""
    path, _ = hf_dir
    cfg, params, _ = read_xlnet_dir(path)
    ids, seg, mask, _, _ = _inputs(2)
    perm = np.zeros((B, L, L), np.float32)
    perm[:, :, 7] = 1.0  # nobody sees token 7 (it is the only target)
    tm = np.zeros((B, 1, L), np.float32)
    tm[:, 0, 7] = 1.0
    lg_a, h_a, _ = _ours(cfg, params, ids, seg, mask, perm, tm)
    ids2 = ids.copy()
    ids2[:, 7] = (ids[:, 7] + 1) % 97
    lg_b, h_b, _ = _ours(cfg, params, ids2, seg, mask, perm, tm)
    np.testing.assert_allclose(lg_a, lg_b, atol=1e-6)
    assert np.abs(h_a[:, 7] - h_b[:, 7]).max() > 1e-3


def test_export_loads_in_transformers(hf_dir, tmp_path):
    import transformers

    path, model = hf_dir
    cfg, params, _ = read_xlnet_dir(path)
    export_xlnet(cfg, jax.tree.map(np.asarray, params), tmp_path / "lm")
    export_xlnet(cfg, params, tmp_path / "base", with_lm_head=False)
    again = transformers.XLNetLMHeadModel.from_pretrained(tmp_path / "lm").eval()
    x = _inputs(3)
    np.testing.assert_allclose(_hf(again, *x)[0], _hf(model, *x)[0], atol=1e-6)
    base = transformers.XLNetModel.from_pretrained(tmp_path / "base").eval()
    ids, seg, mask, perm, _ = x
    with torch.no_grad():
        h = base(input_ids=torch.tensor(ids), token_type_ids=torch.tensor(seg),
                 attention_mask=torch.tensor(mask, dtype=torch.float32),
                 perm_mask=torch.tensor(perm)).last_hidden_state.numpy()  # fmt: skip
    cfg2, params2, has_head = read_xlnet_dir(tmp_path / "base")
    assert not has_head
    _, h_ours, _ = _ours(cfg2, params2, ids, seg, mask, perm, None)
    np.testing.assert_allclose(h_ours, h, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["classification", "qa"])
def test_fine_tuning_heads_match_transformers(tmp_path, kind):
    import transformers

    from bert_jax.arch.xlnet.heads import (
        XLNetForQuestionAnsweringSimple,
        XLNetForSequenceClassification,
    )

    torch.manual_seed(1)
    cfg = transformers.XLNetConfig(vocab_size=97, d_model=32, n_layer=2, n_head=4, d_inner=64,
                                   num_labels=3 if kind == "classification" else 2)  # fmt: skip
    cls = (transformers.XLNetForSequenceClassification if kind == "classification"
           else transformers.XLNetForQuestionAnsweringSimple)  # fmt: skip
    model = cls(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    model.save_pretrained(tmp_path, safe_serialization=True)
    ours_cfg, params, _ = read_xlnet_dir(tmp_path)
    ids, seg, mask, _, _ = _inputs(4)
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids), token_type_ids=torch.tensor(seg),
                    attention_mask=torch.tensor(mask, dtype=torch.float32))  # fmt: skip
    if kind == "classification":
        got = XLNetForSequenceClassification(ours_cfg, 3).apply({"params": params}, ids, seg, mask)
        np.testing.assert_allclose(got, out.logits.numpy(), atol=1e-5, rtol=1e-5)
    else:
        start, end = XLNetForQuestionAnsweringSimple(ours_cfg).apply(
            {"params": params}, ids, seg, mask
        )
        np.testing.assert_allclose(start, out.start_logits.numpy(), atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(end, out.end_logits.numpy(), atol=1e-5, rtol=1e-5)


def test_remat_layers_give_the_same_gradients(hf_dir):
    import dataclasses

    path, _ = hf_dir
    cfg, params, _ = read_xlnet_dir(path)
    ids, seg, mask, perm, tm = _inputs(5)

    def grads(c):
        def loss(p):
            logits, _ = XLNetLM(c).apply({"params": p}, ids, seg, mask, perm, tm)
            return jax.numpy.sum(jax.nn.log_softmax(logits)[..., 3])

        return jax.jit(jax.grad(loss))(params)

    plain, remat = grads(cfg), grads(dataclasses.replace(cfg, remat=True))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5), plain, remat)
    assert np.abs(plain["transformer"]["layer_0"]["rel_attn"]["r_s_bias"]).max() > 0
