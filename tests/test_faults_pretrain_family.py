"""Fault matrix, pretraining families (issue 32): ELECTRA's generator size, a DistilBERT teacher
of another vocabulary, shards of another objective, a left-to-right LM (and every objective that
reads the text itself) on statically masked shards, the CPU config's geometry, and an unknown
preset. Each is refused up front with one line naming the key and what works, or just works.
Real shards of real English (the embedded corpus) written by create-pretraining-data."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from bert_jax.corpus import embedded as embedded_corpus
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.errors import BertJaxError
from bert_jax.input import PretrainInput
from bert_jax.objectives.masking import MaskingSpec
from bert_jax.tokenization.vocab import load_vocab
from bert_jax.train.config import pretrain_config

SEQ, PRED, VOCAB = 32, 5, 600


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict:
    """A 600-token vocab and sentence-pair shards of the same text, statically masked (the
    default) and with --dynamic_masking (the same instances, unmasked)."""
    from bert_jax.tokenization.vocab_builder import build_vocab

    root = tmp_path_factory.mktemp("family_faults")
    embedded_corpus.write_corpus(root / "corpus.txt", max_bytes=40_000)
    build_vocab(str(root / "corpus.txt"), VOCAB, root, num_threads=1)
    for name, dynamic in (("static", False), ("dynamic", True)):
        create_pretraining_data(str(root / "corpus.txt"), str(root / name), str(root / "vocab.txt"),
                                num_shards=1, dupe_factor=1, max_seq_length=SEQ,
                                max_predictions_per_seq=PRED, dynamic_masking=dynamic)  # fmt: skip
    return {"root": root, "vocab": str(root / "vocab.txt"),
            "static": str(root / "static" / "shard-*.tfrecord"),
            "dynamic": str(root / "dynamic" / "shard-*.tfrecord")}  # fmt: skip


def _bert_config(data, **kw):
    c = pretrain_config("tiny")
    c.update(dict(dtype="float32", vocab_file=data["vocab"], train_files=data["static"],
                  max_seq_length=SEQ, max_predictions_per_seq=PRED, global_batch_size=8,
                  train_steps=2, mesh={"data": 1, "fsdp": 1, "tensor": 1}))  # fmt: skip
    c.update(kw)
    return c


@pytest.mark.parametrize("size", [0.0, 1.5, float("nan")])
def test_electra_generator_size_out_of_range_refused_before_anything_is_written(
    data, tmp_path, size
):
    from bert_jax.configs import electra
    from bert_jax.runs.pretrain import run_pretraining

    config = electra.get_config("cpu")
    config.update(dict(vocab_file=data["vocab"], train_files=data["static"], generator_size=size,
                       max_seq_length=SEQ, max_predictions_per_seq=PRED))  # fmt: skip
    with pytest.raises(BertJaxError, match=r"config\.generator_size=\S+: must be in \(0, 1\]"):
        run_pretraining(config, str(tmp_path / "wd"))
    assert not (tmp_path / "wd").exists()  # no config.json, no vocab.txt


def test_distillation_teacher_of_another_vocabulary_is_refused(data, tiny_hf_dir, tmp_path):
    """The teacher (30522-token uncased WordPiece) and the student's shards (a 600-token vocab
    built here): every id the student reads is a valid teacher id, so nothing failed before."""
    from bert_jax.pretraining.distillation import check_teacher_vocab
    from bert_jax.runs.pretrain import run_pretraining

    config = _bert_config(data, objective="full_sentences", teacher=str(tiny_hf_dir))
    with pytest.raises(BertJaxError) as e:
        run_pretraining(config, str(tmp_path / "wd"))
    message = str(e.value)
    assert f"{tiny_hf_dir}/vocab.txt (30522 tokens)" in message
    assert f"config.vocab_file is {data['vocab']} ({VOCAB} tokens)" in message
    assert f"--config.vocab_file={tiny_hf_dir}/vocab.txt" in message
    assert not (tmp_path / "wd" / "config.json").exists()
    # the teacher's own vocab_file, but shards written with the other one: named by stats.json
    config.vocab_file = str(tiny_hf_dir / "vocab.txt")
    with pytest.raises(BertJaxError, match=r"the shards' \(\S+stats\.json\) is \S+vocab\.txt"):
        check_teacher_vocab(config, tiny_hf_dir / "vocab.txt", 30522)
    # without a vocab file beside the teacher, the sizes decide (a padded table is fine)
    config.train_files = ""
    check_teacher_vocab(config, None, 30522 + 6)
    config.vocab_file = data["vocab"]
    with pytest.raises(BertJaxError, match="a 30522-row table"):
        check_teacher_vocab(config, None, 30522)


def test_shards_of_another_objective_name_both_and_a_fix_that_works(data, tmp_path):
    from bert_jax.configs import t5
    from bert_jax.input.geometry import check_shard_geometry, check_shard_objective
    from bert_jax.runs.pretrain import run_pretraining

    # NSP shards in a T5 config: was "add --config.objective=mlm_nsp", then a field T5 lacks
    config = t5.get_config("tiny")
    config.train_files = data["static"]
    with pytest.raises(BertJaxError) as e:
        run_pretraining(config, str(tmp_path / "t5"))
    message = str(e.value)
    assert "written for objective mlm_nsp" in message and "is span_corruption" in message
    assert "--config pretrain.py:<preset> --config.objective=mlm_nsp" in message
    fixed = _bert_config(data, objective="mlm_nsp")  # the fix it names
    check_shard_objective(fixed)
    check_shard_geometry(fixed)
    # an SOP head on NSP pairs would learn another label
    with pytest.raises(BertJaxError, match="objective mlm_nsp .* is mlm_sop: add "
                       "--config.objective=mlm_nsp, or rewrite .* --objective=sop"):  # fmt: skip
        check_shard_objective(_bert_config(data, objective="mlm_sop"))
    for readable in ("mlm", "ltr", "electra"):  # no sentence head: any pairs serve
        check_shard_objective(_bert_config(data, objective=readable))
    # T5 shards in a BERT config: was "the shards were written with a 32128-token vocab"
    t5_dir = tmp_path / "t5_shards"
    t5_dir.mkdir()
    shard = next(pathlib.Path(data["root"], "static").glob("shard-*"))
    shutil.copy(shard, t5_dir / shard.name)
    stats = {"objective": "span_corruption", "output_files": [str(t5_dir / shard.name)],
             "settings": {"objective": "span_corruption", "inputs_length": 64,
                          "vocab_size": 32128, "spm_model": "/m/spiece.model"}}  # fmt: skip
    (t5_dir / "stats.json").write_text(json.dumps(stats))
    with pytest.raises(
        BertJaxError,
        match=r"objective span_corruption .* is mlm_nsp: these are "
        r"T5 shards: train them with --config t5.py:<preset> "
        r"--config.objective=span_corruption --config.spm_model=/m/spiece.model",
    ):
        run_pretraining(_bert_config(data, train_files=str(t5_dir / "*")), str(tmp_path / "b"))


def _read(files: str, objective: str, masking=None, **kw) -> dict[str, np.ndarray]:
    reader = PretrainInput(files, 8, SEQ, PRED, objective=objective, dynamic_masking=masking,
                           shuffle=False, prefetch=0, num_epochs=1, **kw)  # fmt: skip
    return {k: np.asarray(v) for k, v in next(reader).items()}


def test_objectives_that_read_the_text_get_it_back_from_static_masks(data):
    """ltr (and XLNet's permutation LM, and dynamic masking) on ordinary statically masked
    shards read input_ids with 12% [MASK]; the original tokens are in masked_lm_ids and are put
    back, so they read exactly the text of --dynamic_masking shards of the same corpus."""
    vocab = load_vocab(data["vocab"])
    static = _read(data["static"], "mlm_nsp")  # the masked view, as mlm_nsp trains on it
    assert (static["input_ids"] == vocab["[MASK]"]).mean() > 0.05
    for objective in ("ltr", "permutation_lm"):  # XLNet lays the same text out its own way
        ids = _read(data["static"], objective)["input_ids"]
        assert not (ids == vocab["[MASK]"]).any(), objective
        np.testing.assert_array_equal(ids, _read(data["dynamic"], objective)["input_ids"])
    # dynamic masking (RoBERTa, DistilBERT's base preset) on static shards: was refused;
    # now its fresh masks are drawn over the text, as on --dynamic_masking shards
    spec = MaskingSpec.from_vocab_file(data["vocab"])
    again = _read(data["static"], "mlm", spec)
    on_text = _read(data["dynamic"], "mlm", spec)
    for key in ("input_ids", "masked_lm_positions", "masked_lm_ids"):
        np.testing.assert_array_equal(again[key], on_text[key])
    # ELECTRA keeps the shards' masks: its model rebuilds the text from masked_lm_ids itself
    assert "masked_lm_ids" in _read(data["static"], "electra")


def test_cpu_config_takes_the_shards_geometry(data):
    """pretrain_cpu.py on shards at other lengths than its old 64/10: it takes theirs (stats.json,
    or the first record without one); a geometry set explicitly is still checked."""
    from bert_jax.configs import pretrain_cpu
    from bert_jax.input.geometry import check_shard_geometry, with_shard_geometry

    config = pretrain_cpu.get_config()
    config.train_files = data["static"]
    resolved = with_shard_geometry(config)
    assert (resolved.max_seq_length, resolved.max_predictions_per_seq) == (SEQ, PRED)
    check_shard_geometry(resolved)
    assert config.max_seq_length is None  # the caller's config is left as it was
    config.max_seq_length = 64  # explicit: a real mismatch is refused as before
    with pytest.raises(BertJaxError, match=r"add --config\.max_seq_length=32"):
        check_shard_geometry(with_shard_geometry(config))
    bare = data["root"] / "bare"
    bare.mkdir(exist_ok=True)
    shutil.copy(next(pathlib.Path(data["root"], "static").glob("shard-*")), bare / "a.tfrecord")
    config = pretrain_cpu.get_config()
    config.train_files = str(bare / "a.tfrecord")
    resolved = with_shard_geometry(config)
    assert (resolved.max_seq_length, resolved.max_predictions_per_seq) == (SEQ, PRED)


@pytest.mark.parametrize("family", ["electra", "albert", "roberta", "distilbert"])
def test_family_cpu_presets_take_the_shards_geometry(data, family):
    """Each family's `cpu` preset, as pretrain_cpu.py, takes the shards' geometry (32/5 here)
    instead of refusing them for not being its old 64/10; a geometry set explicitly is checked."""
    import importlib

    from bert_jax.input.geometry import check_shard_geometry, with_shard_geometry

    config = importlib.import_module(f"bert_jax.configs.{family}").get_config("cpu")
    config.train_files = data["static"]
    resolved = with_shard_geometry(config)
    assert (resolved.max_seq_length, resolved.max_predictions_per_seq) == (SEQ, PRED)
    check_shard_geometry(resolved)
    config.max_seq_length = 64
    with pytest.raises(BertJaxError, match=r"add --config\.max_seq_length=32"):
        check_shard_geometry(with_shard_geometry(config))


def test_unknown_preset_is_one_line_listing_the_presets(tmp_path):
    with pytest.raises(BertJaxError, match="unknown model preset 'nope'; known: .*tiny"):
        pretrain_config("nope")
    proc = subprocess.run(
        [sys.executable, "-m", "bert_jax.cli", "pretrain", "--config", "electra.py:foo",
         f"--workdir={tmp_path / 'w'}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr == (
        "bert-jax: error: --config: electra preset 'foo': use one of small, base, large, cpu\n"
    )


@pytest.mark.slow  # two CLI pretraining runs of ModernBERT's cpu preset (about 40 s each)
def test_modernbert_pretraining_on_a_full_disk_is_one_line_and_resumes(data, tmp_path):
    """ModernBERT pretraining with its workdir on a 32 kB tmpfs: the first checkpoint cannot be
    written. Was: the error line, then ~110 lines of tracebacks (tensorboardX's atexit flush,
    its worker thread, asyncio's unretrieved futures of the failed save). Now one line naming
    the full disk's path; no step looks finished; with room again the same command completes."""
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32k", "tmpfs", str(disk)],
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode:
        pytest.skip(f"cannot mount a small tmpfs here ({r.stderr.strip()})")
    try:
        create_pretraining_data(str(data["root"] / "corpus.txt"), str(data["root"] / "mb"),
                                data["vocab"], num_shards=1, dupe_factor=1, max_seq_length=SEQ,
                                max_predictions_per_seq=PRED * 2, objective="modernbert",
                                dynamic_masking=True)  # fmt: skip
        cmd = [sys.executable, "-m", "bert_jax.cli", "pretrain", "--config=modernbert.py:cpu",
               f"--workdir={disk / 'wd'}", f"--config.vocab_file={data['vocab']}",
               f"--config.train_files={data['root'] / 'mb' / 'shard-*.tfrecord'}",
               f"--config.max_seq_length={SEQ}", f"--config.max_predictions_per_seq={PRED * 2}",
               "--config.train_steps=4", "--config.checkpoint_every_steps=2",
               "--config.eval_every_steps=0", "--config.warmup_steps=1",
               "--config.global_batch_size=4", "--config.batch_warmup_start=2",
               "--config.batch_warmup_steps=2"]  # fmt: skip
        full = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert full.returncode == 2, full.stderr[-3000:]
        assert full.stderr.count("\n") == 1, full.stderr[-3000:]
        assert full.stderr.startswith(f"bert-jax: error: {disk / 'wd'}/")
        assert "No space left on device" in full.stderr
        steps = disk / "wd" / "checkpoints"
        assert not [p for p in steps.glob("*") if p.name.isdigit()]  # none looks finished
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr[-3000:]
        assert sorted(p.name for p in steps.iterdir()) == ["2", "4"]
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
