"""Multi-host pretraining on CPU: two real JAX processes (jax.distributed with a local
coordinator on 127.0.0.1, gloo CPU collectives, 4 CPU devices each) run the tiny pretraining
config on real shards, each reading only its own shard file. Their per-step losses must equal a
single process (this one, 8 devices) fed the same global batches, and only process 0 may write
the workdir's metrics and TensorBoard events."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bert_jax.corpus import embedded as embedded_corpus
from bert_jax.data.pipeline import create_pretraining_data

SEQ, PRED, BATCH, STEPS = 64, 10, 16, 6

WORKER = textwrap.dedent(
    """
    import json, sys
    import jax
    jax.config.update("jax_num_cpu_devices", 4)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    port, pid, overrides, workdir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid)
    from bert_jax.runs.pretrain import run_pretraining
    sys.path.insert(0, sys.argv[5])
    from test_multiprocess_pretrain import tiny_config
    result = run_pretraining(tiny_config(json.loads(overrides)), workdir)
    print("DEVICES", len(jax.devices()), len(jax.local_devices()), jax.process_index())
    jax.distributed.shutdown()
    """
)


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


@pytest.fixture(scope="module")
def shards(tmp_path_factory, uncased_vocab) -> dict[str, str]:
    root = tmp_path_factory.mktemp("mp_shards")
    embedded_corpus.write_corpus(root / "corpus.txt", max_bytes=120_000)
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _losses(workdir: pathlib.Path) -> list[float]:
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))  # each step written once
    return [r["loss"] for r in records]


@pytest.fixture(scope="module")
def two_process_run(shards, tmp_path_factory) -> pathlib.Path:
    workdir = tmp_path_factory.mktemp("mp_run")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    tests_dir = str(pathlib.Path(__file__).resolve().parent)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                str(port),
                str(pid),
                json.dumps(shards),
                str(workdir),
                tests_dir,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
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
    for pid, out in enumerate(outs):
        assert f"DEVICES 8 4 {pid}" in out
    return workdir


def test_two_processes_give_the_losses_of_one(shards, two_process_run, tmp_path):
    from bert_jax.input import PretrainInput
    from bert_jax.runs.pretrain import run_pretraining

    # The same global batches in one process: process i's rows come from its own file only.
    readers = [
        PretrainInput(
            shards["train_files"], BATCH, SEQ, PRED, seed=0, process_index=i, process_count=2
        )  # fmt: skip
        for i in (0, 1)
    ]

    def global_batches():
        while True:
            parts = [next(r) for r in readers]
            yield {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0]}

    run_pretraining(tiny_config(shards), str(tmp_path), batches=global_batches())
    single, multi = _losses(tmp_path), _losses(two_process_run)
    print("one process:", single, "\ntwo processes:", multi)
    assert single[-1] < single[0]  # it trains
    np.testing.assert_allclose(multi, single, rtol=2e-5)


def test_only_process_zero_writes_metrics_and_events(two_process_run):
    _losses(two_process_run)  # one record per step, not one per process
    events = list((two_process_run / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1
    assert (two_process_run / "config.json").exists()
