"""Sequence packing: packed rows give every example the outputs it gets alone (transformers on
each example; our padded batch for RoBERTa, ALBERT, scanned and causal layers), the packed loss
and gradient equal the padded ones, the packer's bookkeeping, and a packed GLUE fine-tuning."""

from __future__ import annotations

import json
import pathlib

import jax
import numpy as np
import pytest

from bert_jax.arch.bert.heads import BertForSequenceClassification
from bert_jax.arch.bert.variants import variant_config
from bert_jax.errors import BertJaxError
from bert_jax.input.packing import (
    assign_rows,
    pack_arrays,
    unpack_sequences,
    unpack_tokens,
)
from bert_jax.tasks.packed import PackedClassificationTask
from bert_jax.tasks.train_tasks import ClassificationTask

ROOT = pathlib.Path(__file__).parent.parent
SEQ_LEN = 32
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            vocab_size=120, max_position_embeddings=64, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)  # fmt: skip


def examples(n: int, vocab: int, seed: int = 0, two_segments: bool = True) -> dict[str, np.ndarray]:
    """n right-padded examples of random lengths 3..SEQ_LEN/2, segment 1 on each second half."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((n, SEQ_LEN), np.int32)
    mask, seg = np.zeros_like(ids), np.zeros_like(ids)
    for i, length in enumerate(rng.integers(3, SEQ_LEN // 2 + 1, n)):
        ids[i, :length] = rng.integers(3, vocab, length)
        mask[i, :length] = 1
        seg[i, length // 2 : length] = two_segments
    labels = rng.integers(0, 3, n).astype(np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": seg, "labels": labels}


# ---- the model against transformers -------------------------------------------------------------
def test_packed_pretraining_outputs_equal_transformers_per_example(tiny_hf_dir):
    """MLM logits of every token and NSP logits of every packed example equal transformers'
    BertForPreTraining run on that example alone (same weights, the tiny HF checkpoint)."""
    import torch
    import transformers

    from bert_jax.arch.bert.heads import BertForPreTraining
    from bert_jax.arch.bert.pretrained import load_pretrained

    pre = load_pretrained(str(tiny_hf_dir))
    data = examples(6, 1000)
    packed, packing = pack_arrays(data, max_sequences=4)
    assert packing.num_rows < 6  # several examples share a row
    model = BertForPreTraining(pre.config, max_sequences=4)
    rows = (packed["input_ids"], packed["input_mask"], packed["segment_ids"])
    out = jax.jit(lambda p: model.apply({"params": p}, *rows, pack_BxL=packed["pack_ids"]))(
        pre.params
    )
    np.testing.assert_array_equal(out.encoder.present, packed["present"])
    mlm_NxLxV = unpack_tokens(np.asarray(out.mlm_logits), packing)
    nsp_Nx2 = unpack_sequences(np.asarray(out.nsp_logits), packing)
    torch_model = transformers.BertForPreTraining.from_pretrained(tiny_hf_dir).eval()
    for i, length in enumerate(packing.lengths):
        with torch.no_grad():
            ref = torch_model(
                input_ids=torch.tensor(data["input_ids"][i : i + 1, :length], dtype=torch.long),
                token_type_ids=torch.tensor(data["segment_ids"][i : i + 1, :length]).long(),
            )
        np.testing.assert_allclose(mlm_NxLxV[i, :length], ref.prediction_logits[0], atol=1e-4)
        np.testing.assert_allclose(nsp_Nx2[i], ref.seq_relationship_logits[0], atol=1e-5)


# ---- packed == padded across the family --------------------------------------------------------
@pytest.mark.parametrize(
    "family, switches",
    [
        ("roberta", {"scan_layers": True}),  # position offset, scanned layers
        ("albert", {"embedding_size": 16, "remat_policy": "full"}),  # shared, factorised, remat
        # No token types, no pooler; under causal attention a sentence head reads the last token.
        ("distilbert", {"causal": True, "scan_layers": True}),
    ],
)
def test_packed_logits_equal_padded(family, switches):
    cfg = variant_config(family, **TINY, **switches)
    data = examples(7, cfg.vocab_size, seed=1, two_segments=cfg.type_vocab_size > 1)
    packed, packing = pack_arrays(data, max_sequences=4)
    model = BertForSequenceClassification(cfg, 3, max_sequences=4)
    rows = (packed["input_ids"], packed["input_mask"], packed["segment_ids"])

    @jax.jit  # one compile for init and both layouts
    def padded_and_packed(key):
        inputs = (data["input_ids"], data["input_mask"], data["segment_ids"])
        params = model.init(key, *inputs)["params"]
        padded_Nx3 = model.apply({"params": params}, *inputs)
        return padded_Nx3, model.apply({"params": params}, *rows, pack_BxL=packed["pack_ids"])

    padded_Nx3, packed_RxSx3 = padded_and_packed(jax.random.PRNGKey(0))
    assert packed_RxSx3.shape == (packing.num_rows, 4, 3) and packing.num_rows < 7
    got = unpack_sequences(np.asarray(packed_RxSx3), packing)
    np.testing.assert_allclose(got, np.asarray(padded_Nx3), atol=1e-5)


# ---- the fine-tuning loss ---------------------------------------------------------------------
def test_packed_loss_and_gradient_equal_padded():
    cfg = variant_config("bert", **{**TINY, "num_hidden_layers": 1})  # a cheaper backward pass
    data = examples(8, cfg.vocab_size, seed=2)
    packed, packing = pack_arrays(data, max_sequences=4)
    padded = ClassificationTask(cfg, 8, SEQ_LEN, 3)
    packed_task = PackedClassificationTask(cfg, packing.num_rows, SEQ_LEN, 3, max_sequences=4)
    batch = {k: packed[k] for k in packed_task.init_inputs()}  # the packer gives them all

    @jax.jit  # one compile for init and both gradients
    def losses_and_grads(key):
        params = padded.model.init(key, **padded.model_inputs(data))["params"]
        grad = lambda task, b: jax.value_and_grad(lambda p: task.loss_fn(p, b, None, True)[0])(
            params
        )
        return grad(padded, data), grad(packed_task, batch)

    (loss_padded, grad_padded), (loss_packed, grad_packed) = losses_and_grads(jax.random.PRNGKey(1))
    assert packing.num_rows < 8 and float(loss_padded) > 0
    np.testing.assert_allclose(loss_packed, loss_padded, rtol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6), grad_packed, grad_padded)


# ---- the packer ----------------------------------------------------------------------------------
def test_packer_places_every_example_once_and_reports_efficiency():
    data = examples(300, 1000, seed=3)
    data["label_weights"] = np.random.default_rng(0).random((300, SEQ_LEN)).astype(np.float32)
    packed, packing = pack_arrays(data, max_sequences=3, token_keys=(
        "input_ids", "input_mask", "segment_ids", "label_weights"))  # fmt: skip
    lengths = data["input_mask"].sum(-1)
    index = packed["example_index"][packed["present"]]
    assert sorted(index.tolist()) == list(range(300))  # every example exactly once
    assert (packed["present"].sum(-1) <= 3).all() and packed["present"][:, 0].all()
    # Each row: its examples back to back from slot 0, numbered 1..S, within max_seq_length.
    for r, row in enumerate(packed["example_index"]):
        row = row[row >= 0]
        expect = np.concatenate([np.full(lengths[i], s + 1) for s, i in enumerate(row)])
        np.testing.assert_array_equal(packed["pack_ids"][r, : len(expect)], expect)
        assert not packed["pack_ids"][r, len(expect) :].any()
        np.testing.assert_array_equal(packed["labels"][r, : len(row)], data["labels"][row])
    for key in ("input_ids", "segment_ids", "label_weights"):  # tokens back where they came from
        real = data[key] * data["input_mask"]
        np.testing.assert_array_equal(unpack_tokens(packed[key], packing), real)
    assert packing.efficiency == pytest.approx(lengths.sum() / (packing.num_rows * SEQ_LEN))
    assert packing.efficiency == pytest.approx(
        packed["input_mask"].sum() / packed["input_mask"].size
    )
    assert packing.padded_efficiency == pytest.approx(lengths.sum() / (300 * SEQ_LEN))
    # No fewer rows than 3 per row and the tokens allow; fewer than greedy packing in order.
    assert packing.num_rows >= max(100, -(-lengths.sum() // SEQ_LEN))
    greedy_rows, used, count = 1, 0, 0
    for length in lengths:
        if used + length > SEQ_LEN or count == 3:
            greedy_rows, used, count = greedy_rows + 1, 0, 0
        used, count = used + length, count + 1
    assert packing.num_rows < greedy_rows


def test_best_fit_decreasing_rows():
    # Longest first, each into the row it fills most tightly: 6|4, 5|5, 3|3|2|... at 10 tokens.
    rows = assign_rows(np.array([4, 6, 5, 3, 5, 3, 2]), max_seq_length=10, max_sequences=4)
    assert rows == [[0, 1], [2, 4], [3, 5, 6]]
    assert assign_rows(np.array([2, 2, 2]), 10, max_sequences=1) == [[0], [1], [2]]


def test_packer_refuses_left_padded_rows():
    data = examples(4, 100)
    data["input_mask"] = data["input_mask"][:, ::-1].copy()
    with pytest.raises(BertJaxError, match="input_mask row 0: packing needs right-padded"):
        pack_arrays(data, max_sequences=4)


# ---- fine-tuning end to end ---------------------------------------------------------------------
def test_packed_glue_finetune_end_to_end(tiny_hf_dir, tmp_path):
    from bert_jax.configs.glue import get_config
    from bert_jax.runs import finetune as runner

    data_dir = ROOT / "tests" / "fixtures" / "tasks" / "glue" / "sst2"
    cfg = get_config("sst2")
    cfg.update(dict(init_checkpoint=str(tiny_hf_dir), data_dir=str(data_dir), do_lower_case=True,
                    max_seq_length=64, train_batch_size=4, eval_batch_size=2, num_devices=1,
                    log_every_steps=1, pack_examples=True, num_train_epochs=2.0))  # fmt: skip
    results = runner.finetune(cfg, str(tmp_path))
    train_rows = (data_dir / "train.tsv").read_text().splitlines()[1:]
    assert results["train_steps"] == int(len(train_rows) / 4 * 2.0)  # as the padded run's
    stats = json.loads((tmp_path / "data_stats.json").read_text())["packing"]
    assert stats["examples"] == len(train_rows) and stats["rows"] < len(train_rows)
    assert stats["efficiency"] > stats["padded_efficiency"]
    gold = [r.split("\t")[1] for r in (data_dir / "dev.tsv").read_text().splitlines()[1:]]
    pred = [
        r.split("\t")[1] for r in (tmp_path / "dev_predictions.tsv").read_text().splitlines()[1:]
    ]
    assert len(pred) == len(gold)  # one prediction per dev example, in order
    hits = np.mean([g == p for g, p in zip(gold, pred, strict=True)])
    assert results["accuracy"] == pytest.approx(hits)
