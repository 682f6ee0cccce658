"""Whole files or nothing: `bert_jax.atomic_write` (local here; gs:// in test_gcs_end_to_end.py)
and the writers that use it, with unwritable paths as one-line errors."""

from __future__ import annotations

import json

import pytest

from bert_jax.atomic_write import open_atomic, write_json_atomic
from bert_jax.config import BertConfig, preset
from bert_jax.errors import BertJaxError


def test_open_atomic_publishes_only_a_finished_file(tmp_path):
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), open_atomic(target) as f:
        f.write("half a line")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old\n"  # untouched
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temporary left over
    with open_atomic(target) as f:
        f.write("ünïcode\r\nline\n")
    assert target.read_bytes() == "ünïcode\r\nline\n".encode()


def test_unwritable_paths_are_one_line_errors(tmp_path):
    missing = tmp_path / "no-such-dir" / "x.json"
    for write in (
        lambda: write_json_atomic(missing, {}),
        lambda: open_atomic(missing).__enter__(),
        lambda: preset("tiny").to_json_file(missing),
    ):
        with pytest.raises(BertJaxError, match=r"no-such-dir/x\.json: cannot write") as e:
            write()
        assert "\n" not in str(e.value)
    assert not (tmp_path / "no-such-dir").exists()


def test_bert_config_json_round_trip(tmp_path):
    cfg = preset("mini", vocab_size=1000)
    cfg.to_json_file(tmp_path / "bert_config.json", hugging_face=True)
    assert json.loads((tmp_path / "bert_config.json").read_text())["model_type"] == "bert"
    assert BertConfig.from_json_file(tmp_path / "bert_config.json") == cfg
    assert [p.name for p in tmp_path.iterdir()] == ["bert_config.json"]
