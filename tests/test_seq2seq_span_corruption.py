"""T5 span corruption: T5's length computation, the corruption itself (sentinels, noise
fraction, reconstruction), shards, resumable dynamic corruption, and a tiny T5 trained through
the one loop on the corpus snapshot that learns (held-out target accuracy above unigram)."""

from __future__ import annotations

import jax
import ml_collections
import numpy as np
import pytest

from bert_jax.data.span_corruption import token_chunks, write_shard
from bert_jax.input.seq2seq import Seq2SeqBatches, read_shards
from bert_jax.objectives.span_corruption import DEFAULT_SPEC as SPEC
from bert_jax.objectives.span_corruption import corrupt, noise_mask, random_spans_helper


def test_lengths_as_t5_computes_them():
    # T5 / transformers' run_t5_mlm_flax: 512 corrupted inputs need 568 raw tokens, 114 targets.
    assert random_spans_helper(512) == (568, 114)
    for inputs_length in (32, 64, 128, 512):
        raw, targets = random_spans_helper(inputs_length)
        rng = np.random.default_rng(inputs_length)
        for _ in range(20):
            i, t = corrupt(np.arange(10, 10 + raw), rng, 1000)
            assert (len(i), len(t)) == (inputs_length, targets)  # a full chunk fills exactly


def test_corruption_reconstructs_the_text():
    vocab, rng = 1000, np.random.default_rng(0)
    for length in (20, 57, 142):
        tokens = rng.integers(3, 900, length)
        mask = noise_mask(length, rng, SPEC)
        assert mask.sum() == round(length * 0.15) and not mask[0]  # spans start non-noise
        inputs, targets = corrupt(tokens, np.random.default_rng(length), vocab)
        assert inputs[-1] == 1 and targets[-1] == 1
        sentinels = inputs[inputs >= 900]
        np.testing.assert_array_equal(sentinels, vocab - 1 - np.arange(len(sentinels)))
        # Put each target span back in place of its sentinel.
        spans, cur = {}, None
        for t in targets[:-1]:
            if t >= 900:
                cur = int(t)
                spans[cur] = []
            else:
                spans[cur].append(int(t))
        rebuilt = [x for t in inputs[:-1] for x in (spans[int(t)] if t >= 900 else [int(t)])]
        np.testing.assert_array_equal(rebuilt, tokens)


def test_shards_and_resumable_dynamic_corruption(tmp_path):
    raw, targets = random_spans_helper(32)
    chunks = np.random.default_rng(0).integers(3, 400, (40, raw))
    n = write_shard(tmp_path / "a.tfrecord", chunks, 500, 32, targets, seed=0)
    assert n == 40
    arrays = read_shards([str(tmp_path / "a.tfrecord")], 32, targets)
    assert arrays["inputs"].shape == (40, 32) and (arrays["inputs"][:, -1] == 1).all()
    it = Seq2SeqBatches(8, seed=3, chunks=chunks, vocab_size=500, lengths=(32, targets))
    for _ in range(6):  # into the second epoch
        next(it)
    state = it.get_state()
    want = [next(it) for _ in range(3)]
    again = Seq2SeqBatches(8, seed=3, chunks=chunks, vocab_size=500, lengths=(32, targets))
    again.set_state(state)
    for w in want:
        got = next(again)
        for k in w:
            np.testing.assert_array_equal(got[k], w[k])


@pytest.mark.slow
def test_tiny_t5_learns_span_corruption(tmp_path, capfd):
    from bert_jax.arch.seq2seq import seq2seq_preset
    from bert_jax.arch.seq2seq.train_task import Seq2SeqTask
    from bert_jax.corpus import snapshot
    from bert_jax.tokenization.t5_vocab import T5Vocab, train_t5_spm
    from bert_jax.train.config import training_config
    from bert_jax.train.loop import train

    docs = list(snapshot.iter_documents(max_documents=400))
    vocab = T5Vocab(train_t5_spm([s for d in docs for s in d], tmp_path, 500))
    inputs_length, batch = 32, 32
    raw, targets_length = random_spans_helper(inputs_length)
    chunks = token_chunks(docs, vocab.sp.EncodeAsIds, raw)
    held_out, train_chunks = chunks[:64], chunks[64:]
    write_shard(tmp_path / "eval.tfrecord", held_out, vocab.size, inputs_length, targets_length,
                seed=1)  # fmt: skip
    ev = read_shards([str(tmp_path / "eval.tfrecord")], inputs_length, targets_length)
    cfg = seq2seq_preset(
        "t5-small", vocab_size=vocab.size, d_model=64, d_kv=16, d_ff=128, num_layers=2,
        num_decoder_layers=2, num_heads=4, dropout_rate=0.0,
    )  # fmt: skip
    task = Seq2SeqTask(
        cfg, batch, inputs_length, targets_length,
        train_data=Seq2SeqBatches(batch, 0, chunks=train_chunks, vocab_size=vocab.size,
                                  lengths=(inputs_length, targets_length)),
        eval_data=[{k: v[i : i + batch].astype(np.int32) for k, v in ev.items()}
                   for i in range(0, 64, batch)],
        first_sentinel_id=vocab.pieces,
    )  # fmt: skip
    c = training_config()
    c.update(learning_rate=3e-3, train_steps=150, warmup_steps=20, log_every_steps=50,
             eval_every_steps=150, checkpoint_every_steps=150, async_checkpoints=False,
             weight_decay=0.0)  # fmt: skip
    c.mesh = ml_collections.ConfigDict({"data": 1, "fsdp": 1, "tensor": 1})
    record = {"seq2seq": cfg.to_dict(), "spm_model": vocab.model_file}
    result = train(c, task, str(tmp_path / "wd"), workdir_config=record)
    logged = capfd.readouterr()
    per_step = f"{batch} sequences x {inputs_length + targets_length} tokens per step"
    assert per_step in logged.out + logged.err  # inputs and targets, not "1 tokens"
    t = ev["targets"][ev["targets"] != 0]
    unigram = np.mean(t == np.bincount(t).argmax())  # the best constant guess, held out
    accuracy = result.last_eval["eval_target_accuracy"]
    print(f"held-out target accuracy {accuracy:.4f}, unigram {unigram:.4f}, "
          f"content accuracy {result.last_eval['eval_content_accuracy']:.4f}")
    assert accuracy > 2 * unigram, (accuracy, unigram)
    # The workdir is what `bert-jax generate --init_checkpoint` reads back.
    from bert_jax.arch.seq2seq.load import load_seq2seq

    loaded = load_seq2seq(tmp_path / "wd")
    assert loaded.config == cfg and str(loaded.spm_model) == vocab.model_file
    jax_params = jax.device_get(result.state.params)
    for a, b in zip(jax.tree.leaves(jax_params), jax.tree.leaves(loaded.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), b)
