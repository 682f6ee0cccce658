"""Multi-host on CPU: two real JAX processes (jax.distributed with a local coordinator on
127.0.0.1, gloo CPU collectives, 4 CPU devices each, FSDP over all 8) run the tiny pretraining
config on real shards, each reading only its own shard file. Checked against one process (this
one, 8 devices) fed the same global batches:
- from scratch, with a SIGTERM to one process part-way: both save the same step (JAX's preemption
  sync point) and stop, and a rerun continues to the single process's per-step losses; only
  process 0 writes metrics and TensorBoard events (one file per launch);
- from an init_checkpoint (no host gathers the sharded model): the single-process losses, and
  the Hugging Face export (written by process 0) holds the trained weights;
- fine-tuning: both processes report the single-process dev metrics, written once by process 0.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap

import cpu_compile
import numpy as np
import pytest

from bert_jax.corpus import snapshot
from bert_jax.data.pipeline import create_pretraining_data

SEQ, PRED, BATCH, STEPS = 64, 10, 16, 10
ROOT = pathlib.Path(__file__).resolve().parents[1]

WORKER = textwrap.dedent(
    """
    import json, sys
    import jax
    jax.config.update("jax_num_cpu_devices", 4)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    port, pid, job = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid)
    sys.path.insert(0, job["tests_dir"])
    from test_multiprocess_pretrain import run_job
    print("RESULT", json.dumps(run_job(job)), flush=True)
    print("DEVICES", len(jax.devices()), len(jax.local_devices()), jax.process_index())
    jax.distributed.shutdown()
    """
)

# Every test here starts two JAX processes (directly or through a shared fixture): four launches,
# 196 s for the module on one core with an empty compilation cache (2026-12-02; five launches took
# 228 s).
pytestmark = pytest.mark.slow


def tiny_config(overrides: dict):
    from bert_jax.train.config import pretrain_config

    c = pretrain_config("tiny")
    c.update(
        dict(
            dtype="float32", max_seq_length=SEQ, max_predictions_per_seq=PRED,
            global_batch_size=BATCH, train_steps=STEPS, warmup_steps=2, learning_rate=1e-3,
            log_every_steps=1, eval_every_steps=0, checkpoint_every_steps=1000,
            async_checkpoints=False,
        )
    )  # fmt: skip
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, -1, 1  # FSDP over all 8 devices
    c.update(overrides)
    return c


def finetune_config(overrides: dict):
    """GLUE CoLA layout (the word-order task), 8 devices as data parallelism."""
    from bert_jax.train.config import finetune_config as base

    c = base("glue")
    c.update(
        dict(
            task="cola", max_seq_length=32, train_batch_size=16, eval_batch_size=16,
            num_train_epochs=1.0, learning_rate=1e-3, log_every_steps=1, do_lower_case=True,
            async_checkpoints=False,
        )
    )  # fmt: skip
    c.update(overrides)
    return c


class SigtermAtBatch:
    """The real training input; drawing batch `k` sends SIGTERM to this process, as a
    preemption notice arriving between two steps."""

    def __init__(self, it, k: int) -> None:
        self.it, self.k, self.drawn = it, k, 0

    def __iter__(self):
        return self

    def __next__(self):
        self.drawn += 1
        if self.drawn == self.k:
            os.kill(os.getpid(), signal.SIGTERM)
        return next(self.it)

    def get_state(self):
        return self.it.get_state()

    def set_state(self, state) -> None:
        self.it.set_state(state)


def run_job(job: dict) -> dict:
    """What each of the two processes runs (see WORKER)."""
    import jax

    if job["kind"] == "finetune":
        from bert_jax.runs import finetune as runner

        return runner.finetune(finetune_config(job["config"]), job["workdir"])
    from bert_jax.input import PretrainInput
    from bert_jax.runs.pretrain import run_pretraining
    from bert_jax.train import make_mesh
    from bert_jax.train.mesh import batch_sharding

    config = tiny_config(job["config"])
    batches = None
    if jax.process_index() == job.get("sigterm_process"):
        real = PretrainInput(
            config.train_files, BATCH, SEQ, PRED, seed=config.seed,
            sharding=batch_sharding(make_mesh(config.mesh)),
        )  # fmt: skip  (what the pretraining task reads, see pretraining.train_input)
        batches = SigtermAtBatch(real, job["sigterm_at_batch"])
    result = run_pretraining(config, job["workdir"], batches=batches)
    return {"preempted": result.preempted, "step": int(result.state.step)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(kind: str, config: dict, workdir: pathlib.Path, **job) -> list[dict]:
    """Runs `job` in two processes; returns each one's RESULT."""
    job.update(kind=kind, config=config, workdir=str(workdir), tests_dir=str(ROOT / "tests"))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=cpu_compile.FLAGS)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(port), str(pid), json.dumps(job)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        )  # fmt: skip
        for pid in (0, 1)
    ]
    outs, errs = [], []
    for p in procs:
        try:
            out, err = p.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        outs.append(out)
        errs.append(err)
    for pid, p in enumerate(procs):
        assert p.returncode == 0, (
            f"process {pid}:\n{errs[pid][-2000:]}\nother:\n{errs[1 - pid][-2000:]}"
        )
    results = []
    for pid, out in enumerate(outs):
        assert f"DEVICES 8 4 {pid}" in out
        results.append(json.loads(out[out.index("RESULT ") + 7 :].splitlines()[0]))
    return results


@pytest.fixture(scope="module")
def shards(tmp_path_factory, uncased_vocab) -> dict[str, str]:
    root = tmp_path_factory.mktemp("mp_shards")
    snapshot.write_corpus(root / "corpus.txt", max_bytes=120_000)
    create_pretraining_data(
        str(root / "corpus.txt"), str(root / "train"), str(uncased_vocab), num_shards=2,
        dupe_factor=1, max_seq_length=SEQ, max_predictions_per_seq=PRED,
    )  # fmt: skip
    files = sorted(str(p) for p in (root / "train").glob("shard-*.tfrecord"))
    assert len(files) == 2  # one per process
    return {
        "train_files": str(root / "train" / "shard-*.tfrecord"),
        "vocab_file": str(uncased_vocab),
    }


def _losses(workdir: pathlib.Path, steps: int = STEPS) -> list[float]:
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, steps + 1))  # each step written once
    return [r["loss"] for r in records]


def _single_process_losses(config: dict, workdir: pathlib.Path, steps: int) -> list[float]:
    """The same global batches in this process: process i's rows come from its own file only."""
    from bert_jax.input import PretrainInput
    from bert_jax.runs.pretrain import run_pretraining

    readers = [
        PretrainInput(
            config["train_files"], BATCH, SEQ, PRED, seed=0, process_index=i, process_count=2
        )  # fmt: skip
        for i in (0, 1)
    ]

    def global_batches():
        while True:
            parts = [next(r) for r in readers]
            yield {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0]}

    config = {k: v for k, v in config.items() if k != "export_hf_dir"}  # keep the 2-process one
    run_pretraining(tiny_config(config), str(workdir), batches=global_batches())
    return _losses(workdir, steps)


@pytest.fixture(scope="module")
def two_process_run(shards, tmp_path_factory) -> dict:
    """The two-process run from scratch, stopped by a SIGTERM to process 1 at its third batch
    and run again to the end: one run serves the equivalence and the preemption checks (a
    separate uninterrupted launch cost the suite about 40 s)."""
    from bert_jax.checkpoint import Checkpointer

    workdir = tmp_path_factory.mktemp("mp_run")
    first = _launch("pretrain", shards, workdir, sigterm_process=1, sigterm_at_batch=3)
    ckpt = Checkpointer(workdir / "checkpoints", read_only=True, async_save=False)
    saved_steps = ckpt.all_steps()
    ckpt.close()
    saved = sorted(p.name for p in (workdir / "checkpoints").glob("*/input/process_*"))
    again = _launch("pretrain", shards, workdir)
    return {"workdir": workdir, "first": first, "saved_steps": saved_steps,
            "input_states": saved, "again": again}  # fmt: skip


def test_two_processes_give_the_losses_of_one(shards, two_process_run, tmp_path):
    single = _single_process_losses(shards, tmp_path, STEPS)
    multi = _losses(two_process_run["workdir"])
    print("one process:", single, "\ntwo processes, preempted and resumed:", multi)
    assert single[-1] < single[0]  # it trains
    np.testing.assert_allclose(multi, single, rtol=2e-5)


def test_only_process_zero_writes_metrics_and_events(two_process_run):
    workdir = two_process_run["workdir"]
    _losses(workdir)  # one record per step, not one per process nor per launch
    events = list((workdir / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 2  # process 0's, one per launch
    assert (workdir / "config.json").exists()


def test_sigterm_to_one_process_saves_the_same_step_on_both(two_process_run):
    first = two_process_run["first"]
    assert first[0] == first[1], first  # both stopped after saving the same step
    step = first[0]["step"]
    assert first[0]["preempted"] and 3 <= step < STEPS, first
    assert two_process_run["saved_steps"] == [step]  # the preemption save (periodic: every 1000)
    assert two_process_run["input_states"] == ["process_0-of-2.json", "process_1-of-2.json"]
    assert two_process_run["again"] == [{"preempted": False, "step": STEPS}] * 2


@pytest.fixture(scope="module")
def from_init_checkpoint(shards, two_process_run, tmp_path_factory) -> dict:
    """Two processes continue from the two-process run's weights (FSDP over both) for 3 steps
    and export a Hugging Face model."""
    root = tmp_path_factory.mktemp("mp_init")
    config = dict(shards, init_checkpoint=str(two_process_run["workdir"]), train_steps=3,
                  export_hf_dir=str(root / "hf"))  # fmt: skip
    assert _launch("pretrain", config, root / "run") == [{"preempted": False, "step": 3}] * 2
    return {"config": config, "workdir": root / "run", "hf": root / "hf"}


def test_init_checkpoint_on_two_processes_gives_the_losses_of_one(
    from_init_checkpoint, two_process_run, tmp_path
):
    single = _single_process_losses(from_init_checkpoint["config"], tmp_path, 3)
    multi = _losses(from_init_checkpoint["workdir"], 3)
    np.testing.assert_allclose(multi, single, rtol=2e-5)
    scratch = _losses(two_process_run["workdir"])
    assert multi[0] < scratch[0] - 0.5, (multi, scratch)  # it starts from the trained weights


def test_hf_export_of_two_processes_holds_the_trained_weights(from_init_checkpoint):
    import jax

    from bert_jax.arch.bert.pretrained import load_pretrained
    from bert_jax.checkpoint import restore_params

    _, trained = restore_params(from_init_checkpoint["workdir"])
    exported = load_pretrained(from_init_checkpoint["hf"])
    assert exported.heads == ("pooler", "mlm", "nsp")
    want = dict(jax.tree_util.tree_flatten_with_path(trained)[0])
    for path, value in jax.tree_util.tree_flatten_with_path(exported.params)[0]:
        np.testing.assert_array_equal(np.asarray(value), np.asarray(want[path]))
    assert sorted(p.name for p in from_init_checkpoint["hf"].iterdir()) == [
        "config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt",
    ]  # fmt: skip


def test_finetuning_on_two_processes_reports_the_metrics_of_one(
    from_init_checkpoint, tmp_path
):
    import importlib.util

    from bert_jax.runs import finetune as runner

    spec = importlib.util.spec_from_file_location("wo", ROOT / "experiments" / "word_order.py")
    word_order = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(word_order)
    word_order.write_cola_layout(str(tmp_path / "data"), num_train=64, num_dev=40, seed=0)
    config = {"init_checkpoint": str(from_init_checkpoint["workdir"]),
              "data_dir": str(tmp_path / "data")}  # fmt: skip
    multi = _launch("finetune", config, tmp_path / "two")
    single = runner.finetune(finetune_config(config), str(tmp_path / "one"))
    assert multi[0] == multi[1]
    assert multi[0]["accuracy"] == pytest.approx(single["accuracy"])
    assert multi[0]["train_steps"] == 4.0  # 64 examples / batch 16
    written = json.loads((tmp_path / "two" / "eval_results.json").read_text())
    assert written == multi[0]
    preds = (tmp_path / "two" / "dev_predictions.tsv").read_text().splitlines()
    assert preds == (tmp_path / "one" / "dev_predictions.tsv").read_text().splitlines()
    assert len(preds) == 41  # header + one line per dev sentence
