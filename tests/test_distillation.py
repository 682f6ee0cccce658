"""DistilBERT-style distillation through the one loop: the student starts from every other
teacher layer, the frozen teacher runs in the same step (no updates, no optimizer state), and
the distillation loss falls on real text."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.arch.bert.heads import BertForPreTraining
from bert_jax.arch.bert.hf import export_hf
from bert_jax.config import preset
from bert_jax.corpus import snapshot
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.pretraining.distillation import distillation_task, student_config, teacher_layers
from bert_jax.train.config import pretrain_config

SEQ, PRED = 64, 10


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, str]:
    """Packed full-sentence shards of the corpus snapshot and a teacher of ours (a 4-layer BERT
    with an MLM head, exported as a Hugging Face dir) on a vocab built from the same text."""
    from bert_jax.tokenization.vocab_builder import build_vocab

    root = tmp_path_factory.mktemp("distill")
    snapshot.write_corpus(root / "corpus.txt", max_bytes=200_000)
    build_vocab(str(root / "corpus.txt"), 2000, root, num_threads=1)
    vocab = str(root / "vocab.txt")
    create_pretraining_data(str(root / "corpus.txt"), str(root / "train"), vocab,
                            objective="full_sentences", max_seq_length=SEQ,
                            max_predictions_per_seq=PRED, dupe_factor=1)  # fmt: skip
    cfg = preset("L4-H128", vocab_size=2000, max_position_embeddings=SEQ)
    params = BertForPreTraining(cfg, use_nsp=False).init(
        jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.int32)
    )["params"]
    export_hf(cfg, params, root / "teacher", vocab_file=vocab)
    return {"train": str(root / "train" / "*.tfrecord"), "vocab": vocab,
            "teacher": str(root / "teacher")}  # fmt: skip


def _config(data, **kw):
    c = pretrain_config("tiny")
    c.update(dict(
        objective="full_sentences", teacher=data["teacher"], dtype="float32",
        train_files=data["train"], vocab_file=data["vocab"], max_seq_length=SEQ,
        max_predictions_per_seq=PRED, global_batch_size=16, learning_rate=1e-3,
        schedule="constant", warmup_steps=0, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, log_every_steps=1, eval_every_steps=0,
        checkpoint_every_steps=1000, async_checkpoints=False,
    ))  # fmt: skip
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 1, 1
    c.update(kw)
    return c


def test_student_layout_and_layer_map():
    teacher = preset("L6-H384-A12")
    student = student_config(teacher)
    assert student.num_hidden_layers == 3 and student.family == "distilbert"
    assert not student.type_vocab_size and not student.pooler
    assert teacher_layers(teacher, student) == [0, 2, 4]


@pytest.mark.slow
def test_a_full_depth_student_reproduces_its_teacher_and_the_teacher_stays_frozen(data):
    from bert_jax.input import PretrainInput
    from bert_jax.train import build_trainer, make_mesh

    config = _config(data, student_layers=4)
    task = distillation_task(config)
    trainer = build_trainer(config, task, make_mesh(config.mesh, jax.devices()[:1]))
    state = trainer.init_state(params=task.student_init)
    batch = next(PretrainInput(data["train"], 16, SEQ, PRED, objective="full_sentences"))
    assert not np.any(batch["segment_ids"])  # one segment: the folded table is exact
    m = jax.device_get(trainer.eval_step(state.params, batch))
    # Same weights, token types folded into positions: the same outputs as the teacher.
    assert m["distill_kl"] < 1e-4 and m["distill_cos"] < 1e-5
    teacher_before = jax.device_get(state.params["teacher"])
    opt_leaves = len(jax.tree.leaves(state.opt_state))
    student_leaves = len(jax.tree.leaves({k: v for k, v in state.params.items() if k != "teacher"}))
    # Adam keeps mu and nu for the student only (+ counts); the teacher has no state.
    assert 2 * student_leaves <= opt_leaves < 2 * student_leaves + 8
    state, _ = trainer.train_step(state, batch)
    after = jax.device_get(state.params["teacher"])
    pairs = zip(jax.tree.leaves(teacher_before), jax.tree.leaves(after), strict=True)
    assert all(np.array_equal(a, b) for a, b in pairs)


@pytest.mark.slow
def test_distillation_loss_falls_through_the_loop(data, tmp_path):
    from bert_jax.arch.bert.pretrained import load_pretrained
    from bert_jax.runs.pretrain import run_pretraining

    result = run_pretraining(_config(data, train_steps=20), str(tmp_path / "run"))
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    losses = [r["distill_loss"] for r in map(json.loads, lines) if "distill_loss" in r]
    assert len(losses) == 20
    first, last = np.mean(losses[:3]), np.mean(losses[-3:])
    print(f"distillation loss {first:.3f} -> {last:.3f}")
    assert last < first - 0.3
    # The student's layer 1 started as the teacher's layer 2 (every other layer).
    teacher = load_pretrained(data["teacher"]).params
    params = jax.device_get(result.state.params)
    t2 = teacher["bert"]["encoder"]["layer_2"]["intermediate"]["kernel"]
    s1 = params["bert"]["encoder"]["layer_1"]["intermediate"]["kernel"]
    assert s1.shape == t2.shape and np.abs(s1 - t2).max() < 0.05  # moved by 20 small steps
    assert np.abs(s1 - teacher["bert"]["encoder"]["layer_1"]["intermediate"]["kernel"]).max() > 0.05
    # A rerun restores the final checkpoint (the frozen teacher's empty optimizer state
    # included) instead of training again.
    again = run_pretraining(_config(data, train_steps=20), str(tmp_path / "run"))
    assert int(again.state.step) == 20
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == len(lines)
    restored = jax.device_get(again.state.params["bert"]["encoder"]["layer_1"])
    assert np.array_equal(restored["intermediate"]["kernel"], s1)


@pytest.mark.slow
def test_a_teacher_without_mlm_head_gets_one_fitted_on_its_frozen_encoder(data, tmp_path):
    """As the sentence-transformers MiniLM: a bare encoder. Its head trains; its encoder not."""
    from bert_jax.arch.bert.pretrained import load_pretrained
    from bert_jax.input import PretrainInput
    from bert_jax.train import build_trainer, make_mesh

    full = load_pretrained(data["teacher"])
    export_hf(full.config, {"bert": full.params["bert"]}, tmp_path / "bare")
    assert "mlm" not in load_pretrained(tmp_path / "bare").heads
    config = _config(data, teacher=str(tmp_path / "bare"))
    task = distillation_task(config)
    assert task.fit_teacher_head and task.frozen_paths == (("teacher", "bert"),)
    trainer = build_trainer(config, task, make_mesh(config.mesh, jax.devices()[:1]))
    state = trainer.init_state(params=task.student_init)
    before = jax.device_get(state.params["teacher"])
    batches = PretrainInput(data["train"], 16, SEQ, PRED, objective="full_sentences")
    for _ in range(2):
        state, metrics = trainer.train_step(state, next(batches))
    after = jax.device_get(state.params["teacher"])
    assert np.isfinite(float(metrics["teacher_head_loss"]))
    same = jax.tree.map(np.array_equal, before["bert"], after["bert"])
    assert all(jax.tree.leaves(same))
    moved = jax.tree.map(lambda a, b: not np.array_equal(a, b), before["predictions"],
                         after["predictions"])  # fmt: skip
    assert all(jax.tree.leaves(moved))
