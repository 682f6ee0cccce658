"""Fault matrix, fine-tuning inputs (issue 17): GLUE TSVs that are empty, header-only or not
UTF-8, and SQuAD files whose every answer lies past its context, whose answer_start is not a
number, or whose paragraph has no context: each is one line naming the file (and line or JSON
path), not a ZeroDivisionError, UnicodeDecodeError or KeyError."""

from __future__ import annotations

import json
import re

import pytest

from bert_jax.errors import BertJaxError
from bert_jax.tasks import glue, squad

HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
ROW = "1\t11\t12\tThe cat sat on the mat.\tA cat was sitting on the mat.\n"


def _mrpc(tmp_path, data: bytes):
    (tmp_path / "train.tsv").write_bytes(data)
    return glue.read_split(glue.get_spec("mrpc"), str(tmp_path), "train")


def test_glue_control_file_reads(tmp_path):
    assert len(_mrpc(tmp_path, (HEADER + ROW).encode())) == 1


def test_glue_header_only_tsv_refused(tmp_path):
    with pytest.raises(
        BertJaxError, match=r"train\.tsv: no examples \(the file is empty or holds only a header\)"
    ):
        _mrpc(tmp_path, HEADER.encode())


def test_glue_empty_tsv_refused(tmp_path):
    with pytest.raises(BertJaxError, match=r"train\.tsv: no examples"):
        _mrpc(tmp_path, b"")


def test_glue_latin1_tsv_names_the_line(tmp_path):
    data = (HEADER + ROW).encode() + "0\t13\t14\tLe café.\tUne école.\n".encode("latin-1")
    with pytest.raises(
        BertJaxError, match=r"train\.tsv: line 3: not UTF-8 \(byte 0xe9; Latin-1\?\)"
    ):
        _mrpc(tmp_path, data)


CONTEXT = "The cat sat on the mat."


def _squad(tmp_path, paragraph: dict):
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [paragraph]}]}))
    return squad.read_examples(str(path), is_training=True, version_2=False)


def _qa(answer_start) -> dict:
    return {"id": "q1", "question": "Where did the cat sit?",
            "answers": [{"text": "the mat", "answer_start": answer_start}]}  # fmt: skip


def test_squad_control_answer_reads(tmp_path):
    examples, stats = _squad(tmp_path, {"context": CONTEXT, "qas": [_qa(15)]})
    assert len(examples) == 1 and stats.skipped_bad_answer == 0


def test_squad_every_answer_past_the_context_refused(tmp_path):
    with pytest.raises(
        BertJaxError, match=r"train\.json: no usable training example: all 1 answers were skipped"
    ):
        _squad(tmp_path, {"context": CONTEXT, "qas": [_qa(500)]})


def test_squad_non_numeric_answer_start_is_skipped_not_a_traceback(tmp_path, caplog):
    good = dict(_qa(15), id="q2")
    examples, stats = _squad(tmp_path, {"context": CONTEXT, "qas": [_qa("fifteen"), good]})
    assert [e.qas_id for e in examples] == ["q2"] and stats.skipped_bad_answer == 1
    assert "question q1: answer_start 'fifteen' is not a number; skipped" in caplog.text


def test_squad_paragraph_without_context_named(tmp_path):
    with pytest.raises(
        BertJaxError,
        match=r"train\.json: data\[0\]\.paragraphs\[0\]: 'context' is missing, expected a str",
    ):
        _squad(tmp_path, {"qas": [_qa(15)]})


@pytest.mark.parametrize(
    "override, message",
    [
        ({"num_train_epochs": 0}, r"config.num_train_epochs=0(\.0)?: must be a number > 0"),
        ({"learning_rate": float("nan")}, r"config.learning_rate=nan: must be a finite"),
        ({"train_batch_size": 0}, r"config.train_batch_size=0: must be an integer >= 1"),
        ({"sweep": True, "sweep_epochs": [2, 0]}, r"config.sweep_epochs=0: must be a number > 0"),
        ({"head_learning_rate": -1e-3}, r"config.head_learning_rate=-0.001 \(learning_rate"),
        ({"head_learning_rate": 1e-3, "learning_rate": 0.0}, r"learning_rate 0.0\): both must"),
    ],
)
def test_finetune_config_refused_before_loading_anything(tmp_path, override, message):
    """The weights and data named here do not exist: the config error comes first, and nothing
    is written."""
    from bert_jax.runs import finetune as runner
    from bert_jax.train.config import finetune_config

    cfg = finetune_config("glue")
    cfg.update(dict(task="mrpc", data_dir=str(tmp_path / "no-data"),
                    init_checkpoint=str(tmp_path / "no-weights"), **override))  # fmt: skip
    with pytest.raises(BertJaxError, match=message):
        runner.finetune(cfg, tmp_path / "w")
    assert not (tmp_path / "w").exists()


def test_finetune_max_seq_length_beyond_the_checkpoints_positions(tmp_path, minilm_dir):
    """MiniLM has 512 positions: 1000 is refused once its config is read, before the data."""
    from bert_jax.runs import finetune as runner
    from bert_jax.train.config import finetune_config

    (tmp_path / "train.tsv").write_bytes((HEADER + ROW).encode())
    cfg = finetune_config("glue")
    cfg.update(dict(task="mrpc", data_dir=str(tmp_path), init_checkpoint=str(minilm_dir),
                    max_seq_length=1000))  # fmt: skip
    with pytest.raises(
        BertJaxError,
        match=r"^max_seq_length 1000 exceeds the checkpoint's max_position_embeddings 512$",
    ):
        runner.finetune(cfg, tmp_path / "w")


def test_old_family_key_is_one_line_naming_task_family(tmp_path):
    """The fine-tuning key `family` is now `task_family`: a config that still sets it (a user's
    own file, `--config.family=glue`) is refused before anything is loaded or written."""
    import subprocess
    import sys

    from bert_jax.runs import finetune as runner
    from bert_jax.train.config import finetune_config

    message = "config family: renamed task_family (glue, squad, ner, swag)"
    cfg = finetune_config("glue")
    cfg.update(dict(task="mrpc", data_dir=str(tmp_path / "no-data"),
                    init_checkpoint=str(tmp_path / "no-weights")))  # fmt: skip
    cfg.family = "glue"  # as an old config file sets it
    with pytest.raises(BertJaxError, match=rf"^{re.escape(message)}$"):
        runner.finetune(cfg, tmp_path / "w")
    assert not (tmp_path / "w").exists()
    # A pretraining config (its `family` is a model family) is no fine-tuning config either.
    from bert_jax.train.config import pretrain_config

    with pytest.raises(BertJaxError, match=r"^config: not a fine-tuning config \(no task_family"):
        runner.finetune(pretrain_config("tiny"), tmp_path / "w")
    assert not (tmp_path / "w").exists()

    cmd = [sys.executable, "-m", "bert_jax.cli", "finetune", "--config=glue.py:mrpc",
           f"--workdir={tmp_path / 'w'}", "--config.family=glue"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and not (tmp_path / "w").exists()
    flag_line = "bert-jax: error: --config.family: renamed task_family (glue, squad, ner, swag)"
    assert proc.stderr.strip().splitlines() == [flag_line]


def test_saved_config_of_an_old_run_still_gives_its_task_family(tmp_path):
    """A fine-tuning workdir written before the rename has "family": "ner" in its config.json:
    its head and labels are read as from a new one's "task_family"; a pretraining run's
    "family" (its model family) is no task family."""
    import numpy as np

    from bert_jax.arch.bert.task_heads import task_head
    from bert_jax.checkpoint import read_workdir_config
    from bert_jax.config import BertConfig
    from bert_jax.runs.export import task_labels
    from bert_jax.task_family_key import saved_task_family
    from bert_jax.tasks import ner

    (tmp_path / "config.json").write_text(json.dumps({"family": "ner", "learning_rate": 5e-5}))
    old = read_workdir_config(tmp_path)
    new = {"task_family": "ner", "learning_rate": 5e-5}
    assert saved_task_family(old) == saved_task_family(new) == "ner"
    assert saved_task_family({"family": "bert"}) is None  # a pretraining run's model family
    labels = tuple(ner.LABELS)
    params = {"classifier": {"kernel": np.zeros((8, len(labels))), "bias": np.zeros(len(labels))}}
    heads = [task_head(run, params, BertConfig(), labels=labels) for run in (old, new)]
    assert [h.arch for h in heads] == ["BertForTokenClassification"] * 2
    assert heads[0].config == heads[1].config and heads[0].config["num_labels"] == len(labels)
    assert task_labels(old) == task_labels(new) == (labels, None)
    assert task_head({"family": "bert"}, params, BertConfig()) is None
