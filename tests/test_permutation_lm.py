"""XLNet's permutation LM through the objectives registry and the shared loop: the input pipeline
re-lays BERT's pair shards out as XLNet's (A [SEP] B [SEP] [CLS]) with span targets and
permutation masks, and a tiny XLNet trained on real English text (the corpus snapshot) predicts
held-out targets well above the unigram baseline."""

from __future__ import annotations

import numpy as np
import pytest

from bert_jax.corpus import snapshot
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.objectives import permutation_lm
from bert_jax.train.config import pretrain_config

SEQ, PRED = 64, 12


def test_layout_targets_and_perm_mask_semantics():
    rs = np.random.RandomState(0)
    ids = rs.randint(10, 50, size=(1, 16))
    ids[0, 0], ids[0, 6], ids[0, 12] = 2, 3, 3  # [CLS] A(5) [SEP] B(5) [SEP] pad(3)
    ids[0, 13:] = 0
    mask = (np.arange(16) < 13).astype(np.int64)[None]
    seg = ((np.arange(16) >= 7) & (np.arange(16) < 13)).astype(np.int64)[None]
    out_ids, out_seg, func = permutation_lm.to_xlnet_layout(ids, mask, seg)
    np.testing.assert_array_equal(out_ids[0, :13], np.r_[ids[0, 1:13], 2])
    np.testing.assert_array_equal(out_seg[0, :13], [0] * 6 + [1] * 6 + [2])
    assert np.flatnonzero(func[0]).tolist() == [5, 11, 12]
    layout = permutation_lm.XLNetLayout(k=3)
    batch = layout.apply({"input_ids": ids, "input_mask": mask, "segment_ids": seg},
                         np.array([7]), 6, seed=1)  # fmt: skip
    w = batch["masked_lm_weights"][0]
    pos = batch["masked_lm_positions"][0][w > 0]
    assert len(pos) == round(10 / 3) and not func[0, pos].any() and (pos < 13).all()
    perm = batch["perm_mask"][0].astype(bool)
    target = np.zeros(16, bool)
    target[pos] = True
    context = ~target & ~func[0]
    assert not perm[:, context].any()  # everyone sees the context
    assert perm[np.ix_(context, target)].all()  # the context sees no target
    assert perm[pos, pos].all()  # a target never sees itself (query stream)
    # Between targets the order is strict: of two targets exactly one sees the other.
    a, b = pos[0], pos[1]
    assert perm[a, b] != perm[b, a]
    again = layout.apply({"input_ids": ids, "input_mask": mask, "segment_ids": seg},
                         np.array([7]), 6, seed=1)  # fmt: skip
    np.testing.assert_array_equal(again["perm_mask"], batch["perm_mask"])


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, str]:
    from bert_jax.tokenization.vocab_builder import build_vocab

    root = tmp_path_factory.mktemp("plm_data")
    snapshot.write_corpus(root / "corpus.txt", max_bytes=300_000)
    docs = (root / "corpus.txt").read_text().strip().split("\n\n")
    n_eval = len(docs) // 8
    (root / "train.txt").write_text("\n\n".join(docs[:-n_eval]) + "\n")
    (root / "eval.txt").write_text("\n\n".join(docs[-n_eval:]) + "\n")
    build_vocab(str(root / "train.txt"), 2000, root, num_threads=1)
    vocab = str(root / "vocab.txt")
    kw = dict(max_seq_length=SEQ, max_predictions_per_seq=PRED, objective="permutation_lm",
              dynamic_masking=True)  # fmt: skip
    create_pretraining_data(str(root / "train.txt"), str(root / "train"), vocab, num_shards=2,
                            dupe_factor=2, **kw)  # fmt: skip
    create_pretraining_data(str(root / "eval.txt"), str(root / "eval"), vocab, dupe_factor=1, **kw)
    return {
        "train": str(root / "train" / "shard-*.tfrecord"),
        "eval": str(root / "eval" / "shard-*.tfrecord"),
        "vocab": vocab,
    }


def _unigram_baseline(data) -> float:
    """Held-out target accuracy of always predicting the most frequent training target (the
    targets are never shown in the query stream, so there is no copy baseline)."""
    from bert_jax.input import EvalInput
    from bert_jax.objectives.baselines import masked_lm_baselines

    train, held_out = (EvalInput(data[s], 64, SEQ, PRED, objective="permutation_lm")
                       for s in ("train", "eval"))  # fmt: skip
    return masked_lm_baselines(train, held_out, mask_id=-1)["unigram"]


@pytest.mark.slow
def test_tiny_xlnet_learns_beyond_unigram(data, tmp_path):
    from bert_jax.runs.pretrain import run_pretraining

    c = pretrain_config("tiny")
    c.update(
        dict(
            objective="permutation_lm", dtype="float32", train_files=data["train"],
            eval_files=data["eval"], vocab_file=data["vocab"], max_seq_length=SEQ,
            max_predictions_per_seq=PRED, global_batch_size=32, learning_rate=1e-3,
            schedule="constant", warmup_steps=0, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, log_every_steps=50, max_eval_steps=20,
            train_steps=300, eval_every_steps=300, checkpoint_every_steps=300,
        )
    )  # fmt: skip
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 1, 1
    c.export_hf_dir = str(tmp_path / "hf")
    # Seeded run (300 steps at constant lr 1e-3): held-out 0.083 against a 0.047 baseline; the
    # loss sits at the unigram plateau (~6.0) until step ~150, then falls. When it leaves the
    # plateau varies with the seed: seeds 0, 1, 2 (`seed` in the config) reach 0.083, 0.090,
    # 0.074 on the corpus snapshot (1.6x-1.9x the baseline), so the bound is 1.25x and +0.01.
    result = run_pretraining(c, str(tmp_path / "run"))
    baseline = _unigram_baseline(data)
    acc = result.last_eval["eval_permutation_lm_accuracy"]
    print(f"held-out permutation-LM target accuracy {acc:.3f}, unigram baseline {baseline:.3f}")
    assert 0.005 < baseline < 0.2
    assert acc > 1.25 * baseline and acc > baseline + 0.01
    _exported_model_agrees(data, tmp_path / "hf", result)


def _exported_model_agrees(data, hf_dir, result) -> None:
    """The run's XLNetLMHeadModel export, in transformers, gives our logits on a held-out batch
    (its perm_mask and target_mapping)."""
    import jax
    import torch
    import transformers

    from bert_jax.arch.xlnet.pretraining import model_inputs
    from bert_jax.input import EvalInput

    batch = next(iter(EvalInput(data["eval"], 4, SEQ, PRED, objective="permutation_lm")))
    inputs = jax.device_get(model_inputs(batch))
    ours = np.asarray(result.trainer.task.model.apply(
        {"params": jax.device_get(result.state.params)}, **inputs)[0])  # fmt: skip
    model = transformers.XLNetLMHeadModel.from_pretrained(hf_dir).eval()
    t = lambda k, dt=torch.float32: torch.tensor(np.asarray(inputs[k]), dtype=dt)  # noqa: E731
    with torch.no_grad():
        theirs = model(
            input_ids=t("input_ids_BxL", torch.long),
            token_type_ids=t("segment_ids_BxL", torch.long),
            attention_mask=t("input_mask_BxL"), perm_mask=t("perm_mask_BxLxL"),
            target_mapping=t("target_mapping_BxPxL"),
        ).logits.numpy()  # fmt: skip
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=1e-4)
