"""T5 pretraining from the command line: the encoder-decoder objectives of the registry
(span_corruption, prefix_lm), `create-pretraining-data` writing their shards (read back by
TensorFlow's own parser), `bert-jax pretrain --config=t5.py:tiny` training a seq2seq workdir
through the one loop with held-out evaluation, and `bert-jax generate` decoding from it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from bert_jax import objectives
from bert_jax.corpus import embedded
from bert_jax.errors import BertJaxError
from bert_jax.objectives import prefix_lm

INPUTS = 64


def test_prefix_lm_split_is_deterministic_and_reconstructs_the_chunk():
    chunk = np.arange(100, 164)
    points = set()
    for example in range(300):
        inputs, targets = prefix_lm.split(chunk, np.random.default_rng((7, example)))
        again = prefix_lm.split(chunk, np.random.default_rng((7, example)))
        np.testing.assert_array_equal(inputs, again[0])
        assert inputs[-1] == targets[-1] == 1  # EOS after each side
        np.testing.assert_array_equal(np.concatenate([inputs[:-1], targets[:-1]]), chunk)
        assert len(inputs) <= INPUTS and len(targets) <= prefix_lm.lengths(INPUTS)[1]
        points.add(len(inputs) - 1)
    # Uniform over [1, 63]: 300 draws reach both ends and almost every point between.
    assert min(points) >= 1 and max(points) <= 63 and len(points) > 55
    with pytest.raises(ValueError, match="cannot be split"):
        prefix_lm.split(np.arange(1), np.random.default_rng(0))


def test_registry_has_the_encoder_decoder_objectives():
    for name in ("span_corruption", "prefix_lm"):
        spec = objectives.get(name)
        assert objectives.is_seq2seq(name) and name not in objectives.names()
        assert [f.name for f in spec.shard_schema(INPUTS, 14)] == ["inputs", "targets"]
    assert objectives.get("span_corruption").lengths(512) == (568, 114)  # T5's numbers
    assert not objectives.is_seq2seq("nsp")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from bert_jax.tokenization.t5_vocab import T5Vocab, train_t5_spm

    path = tmp_path_factory.mktemp("t5-corpus")
    docs = [d for _, d in zip(range(330), embedded.iter_documents(), strict=False)]
    (path / "train.txt").write_text("\n\n".join("\n".join(d) for d in docs[:300]) + "\n")
    (path / "eval.txt").write_text("\n\n".join("\n".join(d) for d in docs[300:]) + "\n")
    spm = train_t5_spm([s for d in docs[:300] for s in d], path / "vocab", vocab_size=300)
    return path, T5Vocab(spm)


def _tf_parse(files, inputs_length, targets_length):
    tf = pytest.importorskip("tensorflow")
    spec = {"inputs": tf.io.FixedLenFeature([inputs_length], tf.int64),
            "targets": tf.io.FixedLenFeature([targets_length], tf.int64)}  # fmt: skip
    records = list(tf.data.TFRecordDataset([str(f) for f in files]).as_numpy_iterator())
    one = tf.io.parse_single_example(records[0], spec)
    rows = {k: v.numpy() for k, v in tf.io.parse_example(records, spec).items()}  # all at once
    for k in spec:
        np.testing.assert_array_equal(one[k].numpy(), rows[k][0])
    return rows


def test_prefix_lm_shards_hold_consecutive_text(corpus, tmp_path):
    from bert_jax.data.seq2seq_pipeline import create_seq2seq_data
    from bert_jax.input.seq2seq import read_shards

    path, vocab = corpus
    one = create_seq2seq_data(str(path / "eval.txt"), str(tmp_path / "a"), vocab.model_file,
                              objective="prefix_lm", inputs_length=32, seed=3)  # fmt: skip
    assert one["settings"]["targets_length"] == 32 and one["features"] == ["inputs", "targets"]
    rows = read_shards(sorted(map(str, (tmp_path / "a").glob("*.tfrecord"))), 32, 32)
    stream = [i for line in (path / "eval.txt").read_text().splitlines() if line
              for i in vocab.sp.EncodeAsIds(line)]  # fmt: skip
    for j, (i, t) in enumerate(zip(rows["inputs"], rows["targets"], strict=True)):
        text = np.concatenate([i[i != 0][:-1], t[t != 0][:-1]])
        np.testing.assert_array_equal(text, stream[32 * j : 32 * (j + 1)])
    # An example depends on (seed, its index) only, not on how the shards split the examples.
    create_seq2seq_data(str(path / "eval.txt"), str(tmp_path / "b"), vocab.model_file,
                        objective="prefix_lm", inputs_length=32, seed=3, num_shards=3)  # fmt: skip
    three = read_shards(sorted(map(str, (tmp_path / "b").glob("*.tfrecord"))), 32, 32)
    assert sorted(map(bytes, rows["inputs"])) == sorted(map(bytes, three["inputs"]))


def _cli(*args):
    proc = subprocess.run([sys.executable, "-m", "bert_jax.cli", *args], capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_span_corruption_shards_pretrain_and_generate(corpus, tmp_path):
    path, vocab = corpus
    for split, shards in (("train", 2), ("eval", 1)):
        _cli("create-pretraining-data", "--objective=span_corruption",
             f"--input_file={path / f'{split}.txt'}", f"--spm_model={vocab.model_file}",
             f"--max_seq_length={INPUTS}", f"--output_dir={tmp_path / split}",
             f"--num_shards={shards}")  # fmt: skip
    stats = json.loads((tmp_path / "train" / "stats.json").read_text())
    targets_length = stats["settings"]["targets_length"]
    assert (stats["settings"]["inputs_length"], targets_length) == (INPUTS, 14)
    assert stats["settings"]["vocab_size"] == vocab.size and stats["instances"] > 300
    rows = _tf_parse(sorted((tmp_path / "train").glob("*.tfrecord")), INPUTS, targets_length)
    assert len(rows["inputs"]) == stats["instances"]
    first_sentinel = vocab.size - 1
    assert (rows["targets"][:, 0] == first_sentinel).all()  # each target starts at sentinel 0
    assert ((rows["inputs"] == first_sentinel).sum(1) == 1).all()
    assert (rows["inputs"][:, -1] == 1).all()  # a full chunk fills the inputs exactly, EOS last

    workdir = tmp_path / "wd"
    _cli("pretrain", "--config=t5.py:tiny", f"--workdir={workdir}",
         f"--config.spm_model={vocab.model_file}",
         f"--config.train_files={tmp_path / 'train' / 'shard-*.tfrecord'}",
         f"--config.eval_files={tmp_path / 'eval' / 'shard-*.tfrecord'}",
         "--config.train_steps=4", "--config.eval_every_steps=4", "--config.log_every_steps=2",
         "--config.checkpoint_every_steps=4", "--config.max_eval_steps=2",
         # smaller than tiny (less to compile); also checks the size overrides reach the model
         "--config.num_layers=1", "--config.d_model=32", "--config.d_ff=64",
         "--config.num_heads=2", "--config.d_kv=16")  # fmt: skip
    metrics = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    evals = [m for m in metrics if "eval_target_accuracy" in m]
    assert evals and evals[-1]["step"] == 4 and 0 <= evals[-1]["eval_content_accuracy"] <= 1
    record = json.loads((workdir / "config.json").read_text())
    assert record["seq2seq"]["vocab_size"] == vocab.size and record["seq2seq"]["d_model"] == 32
    assert record["seq2seq"]["num_decoder_layers"] == 1
    assert record["objective"] == "span_corruption"

    lines = (path / "eval.txt").read_text().split("\n")[:3]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    _cli("generate", f"--init_checkpoint={workdir}", f"--input_file={tmp_path / 'in.txt'}",
         f"--output_file={out}", "--max_new_tokens=6")  # fmt: skip
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["input"] for r in rows] == lines
    for r in rows:
        assert 1 <= len(r["output_ids"]) <= 6 and r["output"] == vocab.decode(r["output_ids"])


def test_shards_of_another_geometry_are_refused(corpus, tmp_path):
    from bert_jax.arch.seq2seq.pretraining_task import seq2seq_pretraining_task
    from bert_jax.configs.t5 import get_config
    from bert_jax.data.seq2seq_pipeline import create_seq2seq_data

    path, vocab = corpus
    create_seq2seq_data(str(path / "eval.txt"), str(tmp_path), vocab.model_file,
                        objective="span_corruption", inputs_length=32)  # fmt: skip
    config = get_config("tiny")
    config.spm_model, config.train_files = vocab.model_file, str(tmp_path / "*.tfrecord")
    with pytest.raises(BertJaxError, match="inputs_length=32 .*--config.max_seq_length=32"):
        seq2seq_pretraining_task(config)
    config.max_seq_length, config.objective = 32, "prefix_lm"
    with pytest.raises(BertJaxError, match="objective=span_corruption"):
        seq2seq_pretraining_task(config)
