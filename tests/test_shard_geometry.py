"""create-pretraining-data's stats.json records the shards' geometry; a pretraining run with another
max_seq_length / max_predictions_per_seq is refused naming the exact flags, before anything runs."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from bert_jax.configs import pretrain_cpu
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.errors import BertJaxError
from bert_jax.input.geometry import check_shard_geometry


@pytest.fixture(scope="module")
def shards(tmp_path_factory, uncased_vocab) -> pathlib.Path:
    """Shards of real text at create-pretraining-data's defaults (128 tokens, 20 predictions)."""
    out = tmp_path_factory.mktemp("shards")
    create_pretraining_data("embedded:30", str(out), str(uncased_vocab), dupe_factor=1)
    return out


def test_stats_json_records_the_geometry(shards):
    import json

    settings = json.loads((shards / "stats.json").read_text())["settings"]
    assert (settings["max_seq_length"], settings["max_predictions_per_seq"]) == (128, 20)


def test_mismatched_run_is_refused_naming_the_flags(shards, uncased_vocab):
    config = pretrain_cpu.get_config()
    config.max_seq_length, config.max_predictions_per_seq = 64, 10  # set: checked, not taken
    config.train_files = str(shards / "shard-*")
    with pytest.raises(BertJaxError) as e:
        check_shard_geometry(config)
    message = str(e.value)
    assert "--config.max_seq_length=128 --config.max_predictions_per_seq=20" in message
    assert "create-pretraining-data --max_seq_length=64 --max_predictions_per_seq=10" in message
    config.max_seq_length, config.max_predictions_per_seq = 128, 20  # the fix the error names
    check_shard_geometry(config)
    config.max_predictions_per_seq, config.dynamic_masking = 10, True  # masks drawn at run time
    check_shard_geometry(config)
    # the CLI: one line, exit 2, before the model or any checkpoint exists
    cmd = [sys.executable, "-m", "bert_jax.cli", "pretrain", "--config=pretrain_cpu.py",
           f"--workdir={shards.parent / 'w'}", f"--config.train_files={shards}/shard-*",
           f"--config.vocab_file={uncased_vocab}", "--config.max_seq_length=64",
           "--config.max_predictions_per_seq=10"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--config.max_seq_length=128" in proc.stderr
    workdir = shards.parent / "w"  # (it may exist: --workdir is checked to be writable first)
    assert not (workdir / "config.json").exists() and not (workdir / "checkpoints").exists()


@pytest.mark.parametrize("key", ["pack_sequences", "max_seq_length"])
def test_a_geometry_below_one_is_refused_without_a_rewrite_to_suggest(shards, key):
    """Before: `config.pack_sequences=0` on unpacked shards suggested rewriting them with
    create-pretraining-data --pack_sequences=0, which that command refuses."""
    config = pretrain_cpu.get_config()
    config.train_files = str(shards / "shard-*")
    config[key] = 0
    with pytest.raises(BertJaxError, match=f"^config.{key}=0: must be >= 1$"):
        check_shard_geometry(config)


def test_shards_without_stats_are_not_judged(shards, tmp_path):
    (tmp_path / "a.tfrecord").write_bytes(next(shards.glob("shard-*")).read_bytes())
    config = pretrain_cpu.get_config()
    config.train_files = str(tmp_path / "a.tfrecord")
    check_shard_geometry(config)  # no stats.json lists it: the reader checks the records


def test_shards_without_stats_name_the_flag_at_the_first_record(shards, tmp_path):
    """Shards written elsewhere (no stats.json): the first record's lengths name the flag."""
    from bert_jax import objectives
    from bert_jax.input.batches import check_files

    path = tmp_path / "a.tfrecord"
    path.write_bytes(next(shards.glob("shard-*")).read_bytes())  # 128 tokens, 20 predictions
    mlm_nsp = objectives.get("mlm_nsp")
    with pytest.raises(BertJaxError) as e:
        check_files([str(path)], mlm_nsp.shard_schema(64, 20, True), False)
    assert str(e.value).endswith(
        "'input_ids' has length 128, expected 64: add --config.max_seq_length=128, or rewrite "
        "the shards with create-pretraining-data --max_seq_length=64"
    )
    with pytest.raises(BertJaxError, match=r"10: add --config.max_predictions_per_seq=20,"):
        check_files([str(path)], mlm_nsp.shard_schema(128, 10, True), False)
    check_files([str(path)], mlm_nsp.shard_schema(128, 20, True), False)  # the named fix


def test_default_vocab_size_over_shards_of_a_smaller_vocab_is_refused(tmp_path, uncased_vocab):
    """Before: no config.vocab_file over shards of a 3000-token vocab built a 30522-row model."""
    from bert_jax.pretraining.task import bert_config_from

    small = tmp_path / "vocab.txt"
    small.write_text("".join(uncased_vocab.read_text().splitlines(keepends=True)[:3000]))
    create_pretraining_data("embedded:10", str(tmp_path / "s"), str(small), dupe_factor=1)
    config = pretrain_cpu.get_config()
    config.max_seq_length, config.max_predictions_per_seq = 128, 20
    config.train_files, config.vocab_file = str(tmp_path / "s" / "shard-*"), ""
    with pytest.raises(BertJaxError, match=rf"3000-token vocab.*--config.vocab_file={small}$"):
        bert_config_from(config)
    config.vocab_size = 3072  # a size set on purpose (padded) is the user's
    assert bert_config_from(config).vocab_size == 3072
    config.vocab_file = str(small)  # the fix the error names
    assert bert_config_from(config).vocab_size == 3000


def test_a_run_reads_its_shards_records_once(shards, uncased_vocab, monkeypatch):
    """runs.pretrain reads the stats.json records once and hands them on: the objective, geometry
    and vocabulary checks and the task read none again (called on their own, each reads them)."""
    from bert_jax.aot.pretraining import pretraining_task_of
    from bert_jax.input import geometry
    from bert_jax.pretraining.settings import pretrain_settings

    config = pretrain_cpu.get_config()
    config.train_files, config.eval_files = str(shards / "shard-*"), str(shards / "shard-*")
    config.vocab_file = str(uncased_vocab)
    shards_read = geometry.read_run_shards(config)
    assert [r.key for r in shards_read] == ["train_files", "eval_files"]
    reads = []
    original = geometry.shard_settings
    monkeypatch.setattr(geometry, "shard_settings", lambda f: reads.append(f) or original(f))
    geometry.check_shard_objective(config, shards_read)
    config = geometry.with_shard_geometry(config, shards_read)  # unset in pretrain_cpu: filled
    geometry.check_shard_geometry(config, shards_read)
    task = pretraining_task_of(pretrain_settings(config), shards=shards_read)
    assert reads == [] and (task.max_seq_length, task.max_predictions_per_seq) == (128, 20)
    geometry.check_shard_geometry(config)  # on its own: reads the records itself
    assert len(reads) == 2
