"""Task-level distillation: `distill-data` (a fine-tuned teacher's outputs cached in TFRecord
shards) checked against transformers running the same teacher and against TensorFlow's parser;
the distillation losses against a hand computation; resumable, worker-count-independent shards;
a student trained from the cache equals one with the teacher online; bad input refused up front.
Teachers are Hugging Face *For<Task> models written by transformers (tiny, random weights)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import cpu_compile
import numpy as np
import pytest

from bert_jax.errors import BertJaxError
from bert_jax.tasks.distill import cache, labelling, losses
from bert_jax.train.config import finetune_config

ROOT = pathlib.Path(__file__).parent.parent
FIX = ROOT / "tests" / "fixtures" / "tasks"
TRANSFER = "The cat sat on the mat.\nIt was sunny.\nBirds sang.\n\nNumbers add up.\nSums return.\n"


@pytest.fixture(scope="module")
def teachers(tmp_path_factory, uncased_vocab) -> dict[str, pathlib.Path]:
    import torch
    import transformers

    root = tmp_path_factory.mktemp("teachers")
    torch.manual_seed(0)
    base = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=128)  # fmt: skip
    out = {}
    for name, cls, kw in (
        ("glue", transformers.BertForSequenceClassification, {}),
        ("ner", transformers.BertForTokenClassification, {"num_labels": 9}),
        ("squad", transformers.BertForQuestionAnswering, {}),
        ("bare", transformers.BertForPreTraining, {}),
    ):
        path = root / name
        cls(transformers.BertConfig(**base, **kw)).save_pretrained(path)
        shutil.copy(uncased_vocab, path / "vocab.txt")
        out[name] = path
    (root / "transfer.txt").write_text(TRANSFER)
    out["transfer"] = root / "transfer.txt"
    return out


def _cfg(family: str, **kw):
    cfg = finetune_config(family)
    data = {"glue": FIX / "glue" / "mrpc", "ner": FIX / "conll2003", "squad": FIX / "squad"}
    cfg.data_dir = str(data[family])
    cfg.max_seq_length = 64
    if family == "glue":
        cfg.task = "mrpc"
    if family == "squad":
        cfg.max_query_length, cfg.doc_stride = 24, 32
    cfg.update(kw)
    return cfg


def _transformers_logits(teacher: pathlib.Path, family: str, rows: dict) -> np.ndarray:
    import torch
    import transformers

    cls = {"glue": transformers.BertForSequenceClassification,
           "ner": transformers.BertForTokenClassification,
           "squad": transformers.BertForQuestionAnswering}[family]  # fmt: skip
    model = cls.from_pretrained(str(teacher)).eval()
    t = lambda k: torch.tensor(rows[k]).long()
    with torch.no_grad():
        out = model(input_ids=t("input_ids"), attention_mask=t("input_mask"),
                    token_type_ids=t("segment_ids"))  # fmt: skip
    if family == "squad":
        return np.stack([out.start_logits.numpy(), out.end_logits.numpy()], 1)
    return out.logits.numpy()


@pytest.mark.parametrize("family", ["glue", "ner", "squad"])
def test_cached_outputs_are_the_teachers(teachers, tmp_path, family):
    cfg = _cfg(family)
    transfer = (
        str(FIX / "squad" / "dev-v1.1.json") if family == "squad" else str(teachers["transfer"])
    )
    stats = labelling.label(cfg, str(teachers[family]), str(tmp_path), transfer,
                            examples_per_shard=3, pairing="mixed")  # fmt: skip
    assert stats["examples"]["task"] > 0 and stats["examples"]["transfer"] > 0
    _, rows = cache.read_cache(tmp_path)
    n = stats["examples"]["total"]
    assert rows["has_label"].tolist() == [1] * stats["examples"]["task"] + [0] * (
        n - stats["examples"]["task"]
    )
    ref = _transformers_logits(teachers[family], family, rows)
    np.testing.assert_allclose(rows["teacher_logits"], ref, atol=1e-5)
    # recomputed by our teacher on the cached rows: the same numbers
    from bert_jax.tasks.distill.teacher import load_teacher

    again = labelling.TeacherPredictor(load_teacher(str(teachers[family]), cfg), 64, 5)(rows)
    np.testing.assert_allclose(again, rows["teacher_logits"], atol=1e-6)


def test_shards_parse_with_tensorflow(teachers, tmp_path):
    import tensorflow as tf

    stats = labelling.label(_cfg("glue"), str(teachers["glue"]), str(tmp_path),
                            str(teachers["transfer"]), examples_per_shard=4)  # fmt: skip
    _, rows = cache.read_cache(tmp_path)
    spec = {"input_ids": tf.io.FixedLenFeature([64], tf.int64),
            "teacher_logits": tf.io.FixedLenFeature([2], tf.float32),
            "has_label": tf.io.FixedLenFeature([1], tf.int64),
            "labels": tf.io.FixedLenFeature([1], tf.int64)}  # fmt: skip
    files = [str(tmp_path / cache.shard_name(i, stats["num_shards"]))
             for i in range(stats["num_shards"])]  # fmt: skip
    parsed = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(files)]
    assert len(parsed) == stats["examples"]["total"]
    np.testing.assert_array_equal(np.stack([p["input_ids"].numpy() for p in parsed]),
                                  rows["input_ids"])  # fmt: skip
    np.testing.assert_array_equal(np.stack([p["teacher_logits"].numpy() for p in parsed]),
                                  rows["teacher_logits"])  # fmt: skip


def test_losses_against_hand_computation():
    rng = np.random.default_rng(0)
    s, t, T = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), 2.0
    p = np.exp(t / T) / np.exp(t / T).sum(-1, keepdims=True)
    q = np.exp(s / T) / np.exp(s / T).sum(-1, keepdims=True)
    kl = (p * np.log(p / q)).sum(-1) * T * T
    np.testing.assert_allclose(losses.per_row(s, t, "kl", T), kl, rtol=1e-5)
    # the soft cross-entropy at T differs from it by the teacher's entropy only
    ce = -(p * np.log(q)).sum(-1) * T * T
    np.testing.assert_allclose(ce - kl, -(p * np.log(p)).sum(-1) * T * T, rtol=1e-5)
    np.testing.assert_allclose(losses.per_row(s, t, "mse", T), ((s - t) ** 2).mean(-1), rtol=1e-6)
    w = np.array([1.0, 0, 1, 1, 0])
    np.testing.assert_allclose(losses.weighted_mean(kl, w), (kl * w).sum() / 3, rtol=1e-6)
    assert float(losses.per_row(t, t, "kl", T).max()) < 1e-6


def test_student_loss_adds_alpha_times_the_hard_loss(teachers):
    """The loss of one batch: the soft loss over every row + alpha x CE over labelled rows."""
    import jax

    from bert_jax.arch.bert.pretrained import load_pretrained
    from bert_jax.tasks import train_tasks
    from bert_jax.tasks.distill.student import DistillTask

    pre = load_pretrained(teachers["glue"])
    base = train_tasks.ClassificationTask(pre.config, 4, 16, 2)
    task = DistillTask(base, "kl", 2.0, 0.7)
    params = {"bert": pre.params["bert"],
              "classifier": {"kernel": np.full((32, 2), 0.1, np.float32),
                             "bias": np.array([0.3, -0.2], np.float32)}}  # fmt: skip
    rng = np.random.default_rng(1)
    batch = {"input_ids": rng.integers(1000, 2000, (4, 16)).astype(np.int32),
             "input_mask": np.ones((4, 16), np.int32), "segment_ids": np.zeros((4, 16), np.int32),
             "labels": np.array([0, 1, 1, 0], np.int32), "has_label": np.array([1, 1, 0, 0]),
             "teacher_logits": rng.normal(size=(4, 2)).astype(np.float32)}  # fmt: skip
    loss, m = task.loss_fn(params, batch, jax.random.PRNGKey(0), True)
    s = np.asarray(base.predict(params, batch), np.float64)
    t = batch["teacher_logits"].astype(np.float64)
    p, q = [np.exp(x / 2) / np.exp(x / 2).sum(-1, keepdims=True) for x in (t, s)]
    soft = ((p * np.log(p / q)).sum(-1) * 4).mean()
    logq = s - np.log(np.exp(s).sum(-1, keepdims=True))
    hard = -logq[[0, 1], batch["labels"][:2]].mean()
    np.testing.assert_allclose(float(m["distill_loss"]), soft, rtol=1e-5)
    np.testing.assert_allclose(float(m["hard_loss"]), hard, rtol=1e-5)
    np.testing.assert_allclose(float(loss), soft + 0.7 * hard, rtol=1e-5)


def _shard_bytes(directory: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("distill-*"))}


def test_workers_and_a_killed_run_give_the_same_shards(teachers, tmp_path):
    """One worker, two workers and a run killed (SIGKILL) mid-shard then rerun: the same bytes,
    and no temporary file left."""
    from bert_jax.corpus import snapshot

    transfer = tmp_path / "transfer.txt"
    docs = list(snapshot.iter_documents(max_documents=1000))
    transfer.write_text("\n\n".join("\n".join(d) for d in docs) + "\n")
    cfg = _cfg("glue")
    kw = dict(examples_per_shard=32, pairing="mixed", max_transfer_examples=6000)
    one = tmp_path / "one"
    labelling.label(cfg, str(teachers["glue"]), str(one), str(transfer), **kw)
    assert len(_shard_bytes(one)) > 100
    two = tmp_path / "two"
    first = labelling.label(cfg, str(teachers["glue"]), str(two), str(transfer), num_workers=2,
                            worker_index=1, **kw)  # fmt: skip
    assert first["shards_missing"] > 0 and not (two / "stats.json").exists()
    labelling.label(cfg, str(teachers["glue"]), str(two), str(transfer), num_workers=2,
                    worker_index=0, **kw)  # fmt: skip
    assert _shard_bytes(two) == _shard_bytes(one)
    assert (two / "stats.json").read_bytes() == (one / "stats.json").read_bytes()

    # The command in its own processes (one CPU device there, eight here: other batch shapes).
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    cmd = lambda out: [
        sys.executable,
        "-m",
        "bert_jax.cli",
        "distill-data",
        f"--teacher={teachers['glue']}",
        "--config=glue.py:mrpc",
        f"--config.data_dir={cfg.data_dir}",
        "--config.max_seq_length=64",
        f"--input_file={transfer}",
        f"--output_dir={out}",
        "--examples_per_shard=32",
        "--pairing=mixed",
        "--max_transfer_examples=6000",
    ]
    env = dict(os.environ, XLA_FLAGS=cpu_compile.FLAGS)  # not the environment's device count
    assert subprocess.run(cmd(clean), env=env, capture_output=True, timeout=600).returncode == 0
    # SIGKILLed while its fourth shard is being written (whole under its temporary name, not
    # yet renamed: a resume used to leave that file behind).
    proc = subprocess.run([sys.executable, "-c", _KILLED_AT_THE_FOURTH_SHARD, *cmd(killed)[3:]],
                          env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert list(killed.glob(".distill-*.tmp-*"))
    done = _shard_bytes(killed)
    assert 3 <= len(done) < len(_shard_bytes(clean)) and not (killed / "stats.json").exists()
    assert all(done[k] == v for k, v in _shard_bytes(clean).items() if k in done)
    rerun = subprocess.run(cmd(killed), env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert _shard_bytes(killed) == _shard_bytes(clean)
    assert (killed / "stats.json").read_bytes() == (clean / "stats.json").read_bytes()
    assert sorted(p.name for p in killed.iterdir()) == sorted(p.name for p in clean.iterdir())


_KILLED_AT_THE_FOURTH_SHARD = """
import os, signal, sys
real_replace, renamed = os.replace, []
def replace(src, dst, *a, **k):  # what epath's local backend renames with
    if os.path.basename(dst).startswith("distill-"):
        renamed.append(dst)
        if len(renamed) == 4:
            os.kill(os.getpid(), signal.SIGKILL)
    return real_replace(src, dst, *a, **k)
os.replace = replace
from bert_jax.cli import main
sys.argv[0] = "bert-jax"
main()
"""


def _student(teachers, workdir: pathlib.Path, **distill):
    from bert_jax.runs import finetune as runner

    cfg = _cfg("glue", init_checkpoint=str(teachers["glue"]), train_batch_size=4,
               eval_batch_size=4, num_train_epochs=2.0, num_devices=1, learning_rate=1e-3,
               log_every_steps=1)  # fmt: skip
    cfg.mesh.data = 1
    cfg.distill.update(distill)
    result = runner.finetune(cfg, str(workdir))
    import json

    logged = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    return result, [r["loss"] for r in logged if "loss" in r]


def test_student_from_the_cache_equals_the_online_teacher(teachers, tmp_path):
    data = tmp_path / "labels"
    labelling.label(_cfg("glue"), str(teachers["glue"]), str(data), str(teachers["transfer"]))
    kw = dict(loss="kl", temperature=2.0, alpha=0.5)
    cached, cached_losses = _student(teachers, tmp_path / "cached", data=str(data), **kw)
    online, online_losses = _student(teachers, tmp_path / "online", teacher=str(teachers["glue"]),
                                     input_file=str(teachers["transfer"]), **kw)  # fmt: skip
    assert len(cached_losses) == 3  # (4 task + 3 transfer rows) x 2 epochs / 4
    np.testing.assert_allclose(online_losses, cached_losses, rtol=1e-5)
    assert online["accuracy"] == cached["accuracy"]


def test_bad_teachers_and_students_are_refused_before_any_work(teachers, tmp_path):
    out = tmp_path / "out"
    cases = [
        (str(teachers["bare"]), _cfg("glue"), "no task head"),
        (str(teachers["glue"]), _cfg("ner"), "task mismatch"),
        (str(teachers["glue"]), _cfg("glue", task="stsb"), "task mismatch"),
        (str(tmp_path / "nowhere"), _cfg("glue"), "no such teacher"),
    ]
    for teacher, cfg, message in cases:
        with pytest.raises(BertJaxError, match=message) as e:
            labelling.label(cfg, teacher, str(out), str(teachers["transfer"]))
        assert "\n" not in str(e.value)
        assert not out.exists()
    # a second labelling into the same directory, and a student on an unfinished cache
    done = tmp_path / "done"
    labelling.label(_cfg("glue"), str(teachers["glue"]), str(done), str(teachers["transfer"]))
    with pytest.raises(BertJaxError, match="holds another labelling .*differs in pairing"):
        labelling.label(_cfg("glue"), str(teachers["glue"]), str(done), str(teachers["transfer"]),
                        pairing="mixed")  # fmt: skip
    (done / "stats.json").unlink()
    with pytest.raises(BertJaxError, match="labelling is not finished"):
        cache.read_cache(done)
    # a student whose vocabulary differs from the teacher's, on per-token soft labels
    ner_cache = tmp_path / "ner"
    labelling.label(_cfg("ner"), str(teachers["ner"]), str(ner_cache))
    other_vocab = tmp_path / "vocab.txt"
    other_vocab.write_text((teachers["ner"] / "vocab.txt").read_text().replace("[unused0]", "x"))
    from bert_jax.runs import finetune as runner

    cfg = _cfg("ner", init_checkpoint=str(teachers["ner"]), vocab_file=str(other_vocab))
    cfg.distill.data = str(ner_cache)
    with pytest.raises(BertJaxError, match="per token of the teacher's tokenization"):
        runner.finetune(cfg, str(tmp_path / "student"))
    assert not (tmp_path / "student").exists()


def test_distillation_compiles_for_a_tpu_slice():
    """distill.py:tpu's two steps (one host's labelling, the online student step over the slice)
    compile for a v4-8 with libtpu's compile-only devices; tiny sizes keep it quick."""
    pytest.importorskip("libtpu", reason="libtpu (pip install 'jax[tpu]') is not installable here")
    from tpu_compile import least_effort

    from bert_jax.aot.topology import resolve_slice
    from bert_jax.configs import distill
    from bert_jax.tasks.distill.compile import compile_labelling, compile_online_student

    cfg = distill.get_config("tpu")
    cfg.aot_teacher_model, cfg.aot_student_model = "mini", "tiny"
    tpu = resolve_slice("v4-8")
    with least_effort():
        report, rows = compile_labelling(cfg, tpu)
        student, trainer = compile_online_student(cfg, tpu)
    assert report.fits and report.num_devices == 4 and rows == 1024
    assert report.xla_flops_per_device * 4 == pytest.approx(report.model_flops_per_step, rel=0.3)
    report = student
    assert report.fits and trainer.mesh.shape["data"] == 4
    assert "teacher" in trainer.abstract_state().params


@pytest.mark.parametrize("family", ["ner", "squad"])
def test_token_and_span_students_learn_from_the_cache(teachers, tmp_path, family):
    """Per-token (tagging) and per-window start/end (span) soft labels train a student that is
    scored with the task's official metric; the soft loss falls towards the teacher."""
    import json

    from bert_jax.runs import finetune as runner

    data = tmp_path / "labels"
    labelling.label(_cfg(family), str(teachers[family]), str(data))
    cfg = _cfg(family, init_checkpoint=str(teachers["glue"]), train_batch_size=2,
               eval_batch_size=4, num_train_epochs=6.0, num_devices=1, learning_rate=1e-3,
               log_every_steps=1)  # fmt: skip
    cfg.mesh.data = 1
    cfg.distill.update(data=str(data), loss="mse", alpha=0.0)
    results = runner.finetune(cfg, str(tmp_path / "student"))
    assert "f1" in results
    lines = (tmp_path / "student" / "metrics.jsonl").read_text().splitlines()
    logged = [json.loads(x) for x in lines]
    soft = [r["distill_loss"] for r in logged if "distill_loss" in r]
    assert np.isfinite(soft).all() and soft[-1] < soft[0]


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(num_workers=0), "--num_workers=0: must be >= 1"),
        (dict(max_transfer_examples=-3), "--max_transfer_examples=-3: must be >= 0"),
    ],
)
def test_distill_data_counts_refused_before_the_teacher_is_read(kw, message, tmp_path):
    """Both before any file is read (the teacher path does not exist). Before: num_workers=0 blamed
    --worker_index, and max_transfer_examples=-3 kept all but the last 3 rows."""
    from bert_jax.errors import BertJaxError

    with pytest.raises(BertJaxError, match=message):
        labelling.label(_cfg("glue"), str(tmp_path / "no-teacher"), str(tmp_path / "out"), **kw)


def test_online_negative_max_transfer_examples_refused_before_the_teacher_is_read(tmp_path):
    """The online student's config key, as distill-data's flag (it kept all but the last 3)."""
    from bert_jax.tasks.distill.student_setup import Distillation

    cfg = _cfg("glue")
    cfg.distill.update(teacher=str(tmp_path / "no-teacher"), max_transfer_examples=-3)
    with pytest.raises(BertJaxError, match=r"^config distill.max_transfer_examples=-3: must be"):
        Distillation.from_config(cfg, None, None)


def test_squad_transfer_json_with_paragraphs_not_a_list_is_named(teachers, tmp_path):
    """Before: `paragraphs` as a string was iterated by character, so the error said
    "'context' is missing" of paragraph 0."""
    bad = tmp_path / "more.json"
    bad.write_text(json.dumps({"data": [{"title": "t", "paragraphs": "The cat sat."}]}))
    with pytest.raises(BertJaxError) as e:
        labelling.label(_cfg("squad"), str(teachers["squad"]), str(tmp_path / "out"), str(bad))
    assert str(e.value) == (
        f"{bad}: data[0].paragraphs is a str, expected a list of "
        '{"context": ..., "qas": [...]} objects'
    )
    bad.write_text(json.dumps({"data": ["The cat sat."]}))
    with pytest.raises(BertJaxError, match=r"data\[0\] is a str, expected an object"):
        labelling.label(_cfg("squad"), str(teachers["squad"]), str(tmp_path / "out"), str(bad))


def test_stats_json_that_is_not_an_object_is_one_line(tmp_path):
    """Before: a list in stats.json gave an AttributeError traceback from `.get`."""
    (tmp_path / "stats.json").write_text("[1, 2]\n")
    with pytest.raises(BertJaxError, match=r"stats\.json: expected a JSON object .*, found a list"):
        cache.read_stats(tmp_path)


def test_truncated_shard_is_named_with_its_fix_and_a_rerun_rebuilds_it(teachers, tmp_path):
    """Before: the read error named the shard without a fix, and a rerun of the same labelling
    called the cache complete and kept the truncated shard."""
    cfg, teacher, transfer = _cfg("glue"), str(teachers["glue"]), str(teachers["transfer"])
    kw = dict(examples_per_shard=3)
    stats = labelling.label(cfg, teacher, str(tmp_path), transfer, **kw)
    assert stats["num_shards"] >= 2
    good = _shard_bytes(tmp_path)
    victim = tmp_path / cache.shard_name(1, stats["num_shards"])
    victim.write_bytes(good[victim.name][:-7])
    with pytest.raises(BertJaxError) as e:
        cache.read_cache(tmp_path)
    message = str(e.value)
    assert message.startswith(f"{victim}: ") and "\n" not in message
    assert "rerun the same `bert-jax distill-data` command" in message
    # the fix it gives works: the rerun finds the shard short, labels it again, same bytes
    again = labelling.label(cfg, teacher, str(tmp_path), transfer, **kw)
    assert again == stats and _shard_bytes(tmp_path) == good
    cache.read_cache(tmp_path)
    # a shard cut at a record boundary (one record fewer) is caught the same way
    from bert_jax.shards.tfrecord import frame, read_records

    victim.write_bytes(b"".join(frame(r) for r in list(read_records(str(victim)))[:-1]))
    with pytest.raises(BertJaxError, match="rerun the same `bert-jax distill-data` command"):
        cache.read_cache(tmp_path)
    assert labelling.label(cfg, teacher, str(tmp_path), transfer, **kw) == stats
    assert _shard_bytes(tmp_path) == good


@pytest.fixture(scope="module")
def modernbert_dirs(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """A ModernBERT teacher to fine-tune (3 layers, a classification head) and a 1-layer
    ModernBERT student, written by transformers with one ModernBERT-style tokenizer.json."""
    from modernbert_dirs import train_tokenizer_json, write_hf_dir

    root = tmp_path_factory.mktemp("modernbert")
    fast = train_tokenizer_json(root / "tok")
    teacher = write_hf_dir(root / "teacher", fast, "ModernBertForSequenceClassification")
    return teacher, write_hf_dir(root / "student", fast, num_hidden_layers=1)


def _modernbert_logits(hf_dir: pathlib.Path, rows: dict) -> np.ndarray:
    import torch
    import transformers

    cls = transformers.ModernBertForSequenceClassification
    model = cls.from_pretrained(str(hf_dir), attn_implementation="eager").eval()
    t = lambda k: torch.tensor(rows[k]).long()
    with torch.no_grad():
        return model(input_ids=t("input_ids"), attention_mask=t("input_mask")).logits.numpy()


@pytest.mark.slow  # four ModernBERT fine-tuning runs and two labellings (~1-2 min)
def test_modernbert_teaches_and_learns(teachers, modernbert_dirs, tmp_path):
    """A fine-tuned ModernBERT workdir labels the cache with its own predictions (transformers'
    on the workdir converted; the converted directory as teacher gives the same); a 1-layer
    ModernBERT student trains from the cache and with the teacher online (the same losses), and
    its workdir converts to a transformers ModernBERT without the teacher's weights.
    Before: both refused ("the student must be a BERT-family encoder"; "only BERT-family
    teachers label data")."""
    from safetensors.numpy import load_file

    from bert_jax.runs import finetune as runner
    from bert_jax.runs.export import convert_any

    hf_teacher, hf_student = modernbert_dirs
    transfer = str(teachers["transfer"])
    kw = dict(train_batch_size=4, eval_batch_size=4, num_train_epochs=2.0, num_devices=1,
              learning_rate=1e-3, log_every_steps=1)  # fmt: skip
    tuned = tmp_path / "teacher"
    cfg = _cfg("glue", init_checkpoint=str(hf_teacher), **kw)
    cfg.mesh.data = 1
    runner.finetune(cfg, str(tuned))
    data = tmp_path / "labels"
    stats = labelling.label(_cfg("glue"), str(tuned), str(data), transfer)
    assert stats["examples"]["task"] > 0 and stats["examples"]["transfer"] > 0
    _, rows = cache.read_cache(data)
    converted = tmp_path / "teacher_hf"
    convert_any(str(tuned), str(converted))
    ref = _modernbert_logits(converted, rows)
    assert np.abs(ref).max() > 1e-3  # a head that says something
    np.testing.assert_allclose(rows["teacher_logits"], ref, atol=1e-5)
    labelling.label(_cfg("glue"), str(converted), str(tmp_path / "labels_hf"), transfer)
    from_dir = cache.read_cache(tmp_path / "labels_hf")[1]["teacher_logits"]
    np.testing.assert_allclose(from_dir, rows["teacher_logits"], atol=1e-5)
    with pytest.raises(BertJaxError, match="no task head"):  # a masked-LM directory
        labelling.label(_cfg("glue"), str(hf_student), str(tmp_path / "no"), transfer)

    losses = {}
    for mode, distill in (("cached", dict(data=str(data))),
                          ("online", dict(teacher=str(tuned), input_file=transfer))):  # fmt: skip
        cfg = _cfg("glue", init_checkpoint=str(hf_student), **kw)
        cfg.mesh.data = 1
        cfg.distill.update(loss="kl", temperature=2.0, alpha=0.5, **distill)
        result = runner.finetune(cfg, str(tmp_path / mode))
        assert 0.0 <= result["accuracy"] <= 1.0
        logged = (tmp_path / mode / "metrics.jsonl").read_text().splitlines()
        losses[mode] = [json.loads(x)["loss"] for x in logged if '"loss"' in x]
        out = tmp_path / f"{mode}_hf"
        convert_any(str(tmp_path / mode), str(out))
        names = load_file(out / "model.safetensors")
        assert not [k for k in names if "teacher" in k] and "classifier.weight" in names
        assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 1
        _modernbert_logits(out, {k: v[:2] for k, v in rows.items()})  # transformers runs it
    assert len(losses["cached"]) == 3 and np.isfinite(losses["cached"]).all()
    np.testing.assert_allclose(losses["online"], losses["cached"], rtol=1e-5)
