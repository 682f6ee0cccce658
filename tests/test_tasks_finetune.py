"""End to end: `finetune` on every task family through the shared loop, the sweep/seed summary,
the CLI's one-line errors, and a real fine-tune of the real MiniLM checkpoint that learns."""

from __future__ import annotations

import csv
import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

from bert_jax.errors import BertJaxError
from bert_jax.runs import finetune as runner
from bert_jax.tasks.fresh_params import fresh_params
from bert_jax.train.config import finetune_config, pretrain_config, training_config

ROOT = pathlib.Path(__file__).parent.parent
FIX = ROOT / "tests" / "fixtures" / "tasks"


def _load(path: pathlib.Path):
    """A module of experiments/ (not a package) by its path."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _config(name: str, arg: str | None = None):
    mod = _load(ROOT / "experiments" / "configs" / name)
    return mod.get_config(arg) if arg else mod.get_config()


def test_one_schema_for_pretraining_and_finetuning():
    shared = set(training_config())
    assert shared <= set(pretrain_config("tiny")) and shared <= set(finetune_config("glue"))
    for name in ("glue.py", "squad.py", "ner.py", "swag.py"):
        cfg = _config(name)
        assert shared <= set(cfg) and cfg.keep_checkpoints == 1 and cfg.train_steps == 0
    cfg = _config("glue.py", "mrpc")
    run = runner.run_config(cfg, num_examples=100, lr=2e-5, epochs=2.0, batch=8, seed=3)
    assert (run.train_steps, run.warmup_steps) == (25, 2)
    assert (run.learning_rate, run.train_batch_size, run.seed) == (2e-5, 8, 3)
    assert cfg.train_steps == 0  # the copy is filled in, not the config
    cfg.train_steps = 10
    with pytest.raises(BertJaxError, match="num_train_epochs"):
        runner.run_config(cfg, 100, 2e-5, 2.0, 8, 3)


def _tiny(cfg, ckpt, data_dir, workdir=None):
    cfg.init_checkpoint = str(ckpt)
    cfg.data_dir = str(data_dir)
    cfg.do_lower_case = True
    cfg.max_seq_length = 64
    cfg.train_batch_size = 8
    cfg.eval_batch_size = 8
    cfg.num_train_epochs = 1.0
    cfg.log_every_steps = 1
    cfg.num_devices = 1  # the 8 fake CPU devices only add compile and checkpoint time here
    return cfg


def _read(path):
    return json.loads(pathlib.Path(path).read_text())


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v2.0"])  # v1.1 differs only in post-processing (unit tests)
def test_squad_end_to_end(tiny_hf_dir, tmp_path, version):
    cfg = _tiny(_config("squad.py", version), tiny_hf_dir, FIX / "squad")
    cfg.doc_stride = 16
    cfg.max_query_length = 16
    results = runner.finetune(cfg, str(tmp_path))
    preds = _read(tmp_path / "predictions.json")
    data = json.loads((FIX / "squad" / f"dev-{version}.json").read_text())["data"]
    contexts = {qa["id"]: p["context"] for a in data for p in a["paragraphs"] for qa in p["qas"]}
    assert set(preds) == set(contexts)
    assert all(p in contexts[q] for q, p in preds.items())  # answers are spans of the context
    if version == "v2.0":
        assert set(_read(tmp_path / "null_odds.json")) == set(contexts)
        assert {"exact", "f1", "HasAns_exact", "NoAns_exact", "best_f1_thresh"} <= set(results)
    else:
        assert {"exact_match", "f1"} <= set(results)
    assert _read(tmp_path / "eval_results.json") == results
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") >= 1
    assert any((tmp_path / "checkpoints").iterdir())
    assert _read(tmp_path / "data_stats.json")["train"]["questions"] == len(contexts)


@pytest.mark.slow
@pytest.mark.parametrize("feature_based", [False, True])
def test_ner_end_to_end(tiny_hf_dir, tmp_path, feature_based):
    cfg = _tiny(_config("ner.py"), tiny_hf_dir, FIX / "conll2003")
    cfg.feature_based = feature_based
    cfg.lstm_size = 16
    results = runner.finetune(cfg, str(tmp_path))
    assert {"f1", "precision", "recall", "token_accuracy"} <= set(results)
    lines = (tmp_path / "dev_predictions.txt").read_text().split("\n\n")
    assert lines[0].split("\n")[0].startswith("CRICKET O ")
    # The reported scores are seqeval's (conlleval rules) on the written predictions.
    from seqeval.metrics import f1_score

    rows = [[line.split() for line in s.splitlines()] for s in lines if s.strip()]
    gold, pred = [[r[-2] for r in s] for s in rows], [[r[-1] for r in s] for s in rows]
    assert sum(map(len, gold)) == 35  # every word of valid.txt
    assert results["f1"] == pytest.approx(f1_score(gold, pred))
    hits = [g == p for gs, ps in zip(gold, pred, strict=True) for g, p in zip(gs, ps, strict=True)]
    assert results["token_accuracy"] == pytest.approx(sum(hits) / len(hits))


@pytest.mark.slow
def test_swag_end_to_end(tiny_hf_dir, tmp_path):
    cfg = _tiny(_config("swag.py"), tiny_hf_dir, FIX / "swag")
    results = runner.finetune(cfg, str(tmp_path))
    lines = (tmp_path / "dev_predictions.tsv").read_text().splitlines()
    assert lines[0] == "id\tprediction" and lines[1].startswith("0\t")
    with open(FIX / "swag" / "val.csv", newline="") as f:
        labels = {row[""]: int(row["label"]) for row in csv.DictReader(f)}
    preds = dict(line.split("\t") for line in lines[1:])
    assert set(preds) == set(labels)
    hits = [int(preds[k]) == labels[k] for k in labels]
    assert results["accuracy"] == pytest.approx(sum(hits) / len(hits))


@pytest.mark.slow  # two fine-tuning runs (MNLI, then RTE from it): 12 s on 2 idle cores
def test_glue_mnli_two_dev_sets_and_submission(tiny_hf_dir, tmp_path):
    cfg = _tiny(_config("glue.py", "mnli"), tiny_hf_dir, FIX / "glue" / "mnli")
    cfg.do_predict = True
    results = runner.finetune(cfg, str(tmp_path))
    for split in ("matched", "mismatched"):  # the accuracies of the written dev predictions
        gold = [r.split("\t")[-1] for r in
                (FIX / "glue" / "mnli" / f"dev_{split}.tsv").read_text().splitlines()[1:]]
        pred = [r.split("\t")[-1] for r in
                (tmp_path / f"dev_{split}_predictions.tsv").read_text().splitlines()[1:]]
        assert len(pred) == len(gold) > 0
        hits = [g == p for g, p in zip(gold, pred, strict=True)]
        assert results[f"accuracy_{split}"] == pytest.approx(sum(hits) / len(hits))
    assert (tmp_path / "MNLI-m.tsv").read_text().startswith("index\tprediction\n0\t")
    assert (tmp_path / "MNLI-mm.tsv").exists()
    # The workdir carries its vocab, so it starts another fine-tuning (MNLI -> RTE) by itself.
    assert (tmp_path / "vocab.txt").read_bytes() == (tiny_hf_dir / "vocab.txt").read_bytes()
    rte = _tiny(_config("glue.py", "rte"), str(tmp_path), FIX / "glue" / "rte")
    runner.finetune(rte, str(tmp_path / "rte"))  # before: "has no vocab.txt"
    assert (tmp_path / "rte" / "eval_results.json").exists()


def test_sigterm_saves_scores_nothing_and_the_rerun_finishes(tiny_hf_dir, tmp_path, monkeypatch):
    """A preemption notice mid fine-tuning (SIGTERM while the 4th batch is drawn): the step is
    saved and no eval_results.json passes the half-trained model off as a finished run (it did
    before, and a sweep then read it as final); the same command finishes from that step."""
    import os
    import signal

    class NoticeAtFourthBatch(runner.TrainBatches):
        drawn = 0

        def __next__(self):
            NoticeAtFourthBatch.drawn += 1
            if NoticeAtFourthBatch.drawn == 4:
                os.kill(os.getpid(), signal.SIGTERM)
            return super().__next__()

    cfg = _tiny(_config("glue.py", "rte"), tiny_hf_dir, FIX / "glue" / "rte")
    cfg.num_train_epochs = 12.0  # 6 steps of the 4 examples, repeated to a batch of 8
    monkeypatch.setattr(runner, "TrainBatches", NoticeAtFourthBatch)
    with pytest.raises(BertJaxError, match=r"stopped by SIGTERM at step 4 of 6 .*Rerun"):
        runner.finetune(cfg, str(tmp_path))
    assert not (tmp_path / "eval_results.json").exists()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit()) == ["4"]
    monkeypatch.undo()
    results = runner.finetune(cfg, str(tmp_path))
    assert results["train_steps"] == 6 and _read(tmp_path / "eval_results.json") == results
    logged = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").open()
              if "loss" in line]  # fmt: skip
    assert logged == [1, 2, 3, 4, 5, 6], logged  # resumed at 5: no step trained twice


@pytest.mark.slow
def test_sweep_reports_every_point_and_the_best(tiny_hf_dir, tmp_path):
    cfg = _tiny(_config("glue.py", "rte"), tiny_hf_dir, FIX / "glue" / "rte")
    cfg.sweep = True
    cfg.sweep_learning_rates = (1e-3, 1e-5)
    cfg.sweep_epochs = (1.0,)
    cfg.sweep_batch_sizes = (8,)
    results = runner.finetune(cfg, str(tmp_path))
    sweep = _read(tmp_path / "sweep_results.json")
    assert [p["name"] for p in sweep["points"]] == ["lr0.001_ep1_bs8", "lr1e-05_ep1_bs8"]
    for point in sweep["points"]:
        run = _read(tmp_path / "runs" / point["name"] / "seed0" / "eval_results.json")
        assert point["dev"]["accuracy"] == run["accuracy"]
    best = max(sweep["points"], key=lambda p: p["dev"]["headline"])
    assert sweep["best"] == best["name"]
    assert results["best_learning_rate"] == best["learning_rate"]


def test_seed_summary_has_mean_std_median():
    runs = [{"accuracy": 0.5}, {"accuracy": 0.7}, {"accuracy": 0.9}]
    out = runner._summary(runs)
    assert out["accuracy"] == pytest.approx(0.7)
    assert out["accuracy_std"] == pytest.approx(0.2)  # sample std (ddof=1)
    assert out["accuracy_median"] == pytest.approx(0.7) and out["num_seeds"] == 3


def test_cli_reports_bad_input_in_one_line(tmp_path, minilm_dir):
    (tmp_path / "train.tsv").write_text("sentence\tlabel\ngood film\t1\nbad film\t7\n")
    cmd = [
        sys.executable, "-m", "bert_jax.cli", "finetune",
        "--config", str(ROOT / "experiments" / "configs" / "glue.py") + ":sst2",
        "--workdir", str(tmp_path / "w"),
        f"--config.init_checkpoint={minilm_dir}", f"--config.data_dir={tmp_path}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        f"bert-jax: error: {tmp_path}/train.tsv: line 3: label '7' not in sst2's label set "
        "['0', '1']"
    )


@pytest.mark.slow  # 32 steps of the 6-layer MiniLM: 160 s measured on the shared machine
def test_real_minilm_finetune_learns_word_order(minilm_dir, tmp_path):
    """Real data, no download: English sentences from CPython's standard-library docstrings; half
    have their words shuffled (label 0), the rest keep their order (label 1), so the label is a
    true property of each text and the majority class is ~50% (see experiments/word_order.py).
    Fine-tuning the real pretrained MiniLM (6 layers) for 32 steps reaches dev accuracy far above
    the majority class; a model that did not load the pretrained weights stays near chance."""
    word_order = _load(ROOT / "experiments" / "word_order.py")
    data = tmp_path / "data"
    info = word_order.write_cola_layout(str(data), num_train=256, num_dev=128, seed=0)
    cfg = _config("glue.py", "cola")
    cfg.init_checkpoint = str(minilm_dir)
    cfg.data_dir = str(data)
    cfg.max_seq_length = 32
    cfg.train_batch_size = 16
    cfg.num_train_epochs = 2.0
    cfg.learning_rate = 2e-4
    cfg.log_every_steps = 8
    cfg.num_devices = 1
    results = runner.finetune(cfg, str(tmp_path / "work"))
    assert results["accuracy"] >= info["dev_majority"] + 0.25, (results, info)
    assert results["mcc"] > 0.5


def test_new_layers_get_a_truncated_normal_init():
    """BERT's init for the layers a checkpoint lacks: N(0, 0.02) truncated at 2 std by redrawing
    (TF's truncated_normal_initializer), whose std is 0.880 x 0.02; clipping instead would put
    4.6% of the weights exactly on the bounds. Checkpoint layers stay zero until grafted."""
    import numpy as np

    from bert_jax.config import preset
    from bert_jax.tasks.train_tasks import ClassificationTask

    task = ClassificationTask(preset("tiny", vocab_size=100, max_position_embeddings=64), 8, 16,
                              num_labels=3)  # fmt: skip
    params = fresh_params(task, seed=0, initializer_range=0.02)
    w = np.concatenate([params["bert"]["pooler"]["kernel"].ravel(),
                        params["classifier"]["kernel"].ravel()]) / 0.02  # fmt: skip
    assert np.abs(w).max() < 2.0
    assert np.mean(np.abs(w) > 1.99) < 0.002  # clipping: ~0.046
    assert abs(w.std() - 0.880) < 0.02 and abs(w.mean()) < 0.02
    assert not params["bert"]["encoder"]["layer_0"]["intermediate"]["kernel"].any()
    assert not params["classifier"]["bias"].any()
