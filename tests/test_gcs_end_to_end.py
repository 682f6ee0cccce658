"""gs:// end to end against a real GCS JSON API server on localhost (the gcp-storage-emulator
package), reached only through the standard variables: STORAGE_EMULATOR_HOST for the Python
clients (gcsfs under etils.epath) and TENSORSTORE_GCS_HTTP_URL for TensorStore (Orbax). Every
step is the `bert-jax` command a user runs, with nothing local but the temporary output of
`convert` at the end:

  corpus on gs:// -> build-vocab -> gs://b/vocab -> create-pretraining-data -> gs://b/shards
  pretrain phase 1, workdir gs://b/p1, SIGKILLed after a checkpoint, rerun: resumes
  pretrain phase 2, workdir gs://b/p2, init_checkpoint=gs://b/p1, export_hf_dir=gs://b/hf
  finetune (GLUE layout on gs://), init_checkpoint=gs://b/p2, workdir gs://b/ft
  convert --init_checkpoint=gs://b/p2 -> a local dir that transformers loads
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
import time

import cpu_compile
import numpy as np
import pytest
from etils import epath

from bert_jax.corpus import embedded as embedded_corpus

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUCKET = "bert-jax-test"
SEQ, PRED, STEPS = 32, 5, 8
VOCAB = f"gs://{BUCKET}/vocab/vocab.txt"  # written by `bert-jax build-vocab`

# The emulator, with two gaps to real GCS filled in: media downloads carry the object's
# generation in `x-goog-generation` (TensorStore's conditional writes need it), and
# objects.move (`moveTo`, which gcsfs uses for renames; the emulator answers 501, and gcsfs
# would retry it for half a minute before copying).
SERVER = textwrap.dedent(
    r"""
    import sys
    from http import HTTPStatus
    from gcp_storage_emulator import server
    from gcp_storage_emulator.exceptions import NotFound
    from gcp_storage_emulator.handlers import objects

    _download = objects.download

    def download(request, response, storage, *args, **kwargs):
        _download(request, response, storage, *args, **kwargs)
        if response.status.value < 300:
            p = request.params
            obj = storage.get_file_obj(p["bucket_name"], p["object_id"])
            response["x-goog-generation"] = str(obj["generation"])

    def move(request, response, storage, *args, **kwargs):
        p = request.params
        try:
            obj = objects._copy(request.base_url, storage, p["bucket_name"], p["object_id"],
                                p["bucket_name"], p["dest_object_id"])
        except NotFound:
            response.status = HTTPStatus.NOT_FOUND
            return
        storage.delete_file(p["bucket_name"], p["object_id"])
        response.json(obj)

    objects.download = download
    MOVE = (r"^/storage/v1/b/(?P<bucket_name>[-.\w]+)/o/(?P<object_id>.*[^/]+)"
            r"/moveTo/o/(?P<dest_object_id>.*[^/]+)$")
    server.HANDLERS = ((MOVE, {"POST": move}),) + tuple(
        (regex, {m: download if f is _download else f for m, f in handlers.items()})
        for regex, handlers in server.HANDLERS
    )
    port, bucket = int(sys.argv[1]), sys.argv[2]
    srv = server.create_server("127.0.0.1", port, in_memory=True, default_bucket=bucket)
    srv.start()
    print("READY", flush=True)
    sys.stdin.read()  # serve until the test closes our stdin
    srv.stop()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gcs_env():
    """Starts the server; yields the environment that points every client at it (also set in
    this process while the module runs)."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port), BUCKET],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    env = {
        "STORAGE_EMULATOR_HOST": url,
        "TENSORSTORE_GCS_HTTP_URL": url,
        # No metadata server and no gRPC endpoint here: google-auth and gcsfs would probe them.
        "NO_GCE_CHECK": "true",
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
    }
    try:
        assert proc.stdout.readline().strip() == "READY"
        with pytest.MonkeyPatch.context() as mp:
            for k, v in env.items():
                mp.setenv(k, v)
            import gcsfs  # noqa: F401  (after the variables: it reads them on import)
            yield env
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def _run(env: dict, args: list[str], **kw) -> subprocess.Popen | subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    full.update(env, JAX_PLATFORMS="cpu", XLA_FLAGS=cpu_compile.FLAGS)
    cmd = [sys.executable, "-m", "bert_jax.cli", *args]
    opts = dict(cwd=ROOT, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if kw.pop("background", False):
        return subprocess.Popen(cmd, **opts)
    proc = subprocess.run(cmd, **opts, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc


def _gs(path: str) -> epath.Path:
    """A path in the test bucket. gcsfs caches listings per process; the `bert-jax` commands
    write from other processes, so this one forgets what it listed before."""
    import fsspec

    fsspec.filesystem("gs", finalize_on_close=True).invalidate_cache()  # the instance epath uses
    return epath.Path(f"gs://{BUCKET}/{path}")


@pytest.fixture(scope="module")
def shards(gcs_env, tmp_path_factory) -> dict:
    local = tmp_path_factory.mktemp("gcs_corpus") / "corpus.txt"
    embedded_corpus.write_corpus(local, max_bytes=60_000)
    _gs("corpus/part-0.txt").write_text(local.read_text())
    _run(gcs_env, [
        "build-vocab", f"--input_file=gs://{BUCKET}/corpus/*.txt", "--vocab_size=1000",
        f"--output_dir=gs://{BUCKET}/vocab", "--num_threads=1",
    ])  # fmt: skip
    _run(gcs_env, [
        "create-pretraining-data", f"--input_file=gs://{BUCKET}/corpus/*.txt",
        f"--vocab_file={VOCAB}", f"--output_dir=gs://{BUCKET}/shards",
        "--num_shards=2", f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
        "--dupe_factor=1",
    ])  # fmt: skip
    return json.loads(_gs("shards/stats.json").read_text())


def _pretrain_args(workdir: str, config: str = "pretrain.py:tiny", **overrides) -> list[str]:
    flags = dict(
        train_files=f"gs://{BUCKET}/shards/shard-*.tfrecord", vocab_file=VOCAB,
        max_seq_length=SEQ, max_predictions_per_seq=PRED, global_batch_size=8, train_steps=STEPS,
        warmup_steps=2, learning_rate=1e-3, dtype="float32", log_every_steps=1,
        checkpoint_every_steps=2, keep_checkpoints=10, eval_every_steps=0,
    )  # fmt: skip
    flags.update(overrides)
    args = ["pretrain", "--config", f"experiments/configs/{config}", f"--workdir={workdir}"]
    return args + [f"--config.{k}={v}" for k, v in flags.items()] + ["--config.mesh.fsdp=1"]


def _latest_step(workdir: str) -> int | None:
    from bert_jax.checkpoint import Checkpointer

    _gs("")  # fresh listings
    ckpt = Checkpointer(epath.Path(workdir) / "checkpoints", read_only=True, async_save=False)
    try:
        return ckpt.latest_step()
    finally:
        ckpt.close()


@pytest.fixture(scope="module")
def phase1(gcs_env, shards) -> dict:
    """Phase 1 SIGKILLed once its step-2 checkpoint is complete on gs://, then rerun."""
    workdir = f"gs://{BUCKET}/p1"
    proc = _run(gcs_env, _pretrain_args(workdir), background=True)
    deadline = time.time() + 600
    while proc.poll() is None and time.time() < deadline:
        time.sleep(0.5)
        # metrics.jsonl is uploaded once the step-2 save has started; then wait for its commit.
        if _gs("p1/metrics.jsonl").exists() and (_latest_step(workdir) or 0) >= 2:
            break
    proc.send_signal(signal.SIGKILL)
    out = proc.communicate()[0]
    assert proc.returncode == -signal.SIGKILL, out[-3000:]
    killed_at = _latest_step(workdir)
    assert 2 <= killed_at < STEPS, "the run finished before it could be killed"
    resumed = _run(gcs_env, _pretrain_args(workdir))
    return {"workdir": workdir, "killed_at": killed_at, "out": resumed.stdout}


def test_vocab_and_shards_are_written_to_gcs(shards):
    assert len(_gs("vocab/vocab.txt").read_text().splitlines()) == 1000
    written = {p.name for p in _gs("vocab").iterdir()}
    assert {"spm.model", "spm.vocab", "vocab_stats.json"} <= written
    assert shards["instances"] > 100
    names = sorted(p.name for p in _gs("shards").iterdir())
    assert names == ["shard-00000-of-00002.tfrecord", "shard-00001-of-00002.tfrecord", "stats.json"]


def test_phase1_resumes_on_gcs_after_sigkill(phase1):
    assert f"resumed from {phase1['workdir']}/checkpoints at step {phase1['killed_at']}" in (
        phase1["out"]
    )
    assert _latest_step(phase1["workdir"]) == STEPS
    records = [json.loads(line) for line in _gs("p1/metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))  # each step once
    assert _gs("p1/vocab.txt").read_text() == _gs("vocab/vocab.txt").read_text()
    assert json.loads(_gs("p1/config.json").read_text())["bert"]["hidden_size"] == 128

    from tensorboardX.proto.event_pb2 import Event

    from bert_jax.shards.tfrecord import read_records

    steps = set()
    for events in _gs("p1/tensorboard").glob("events.out.tfevents.*"):
        for record in read_records(str(events)):  # CRCs checked
            event = Event.FromString(record)
            steps |= {event.step for v in event.summary.value if v.tag == "loss"}
    assert steps == set(range(1, STEPS + 1))


@pytest.fixture(scope="module")
def phase2(gcs_env, phase1) -> str:
    """Phase 2 from the gs:// phase-1 workdir at learning rate 0: its weights stay phase 1's."""
    workdir = f"gs://{BUCKET}/p2"
    _run(gcs_env, _pretrain_args(
        workdir, "pretrain_phase2.py:tiny", init_checkpoint=phase1["workdir"], train_steps=2,
        learning_rate=0.0, export_hf_dir=f"gs://{BUCKET}/hf",
    ))  # fmt: skip
    return workdir


def test_phase2_starts_from_phase1_and_exports_to_gcs(phase1, phase2):
    from bert_jax.arch.bert.pretrained import load_pretrained
    from bert_jax.checkpoint import restore_params

    _, p1 = restore_params(phase1["workdir"])
    exported = load_pretrained(f"gs://{BUCKET}/hf")
    assert exported.heads == ("pooler", "mlm", "nsp")
    assert exported.vocab_file is not None and exported.vocab_file.read_text().startswith("[PAD]")
    p1_leaves = dict(_leaves(p1))
    for name, value in _leaves(exported.params):
        np.testing.assert_array_equal(value, p1_leaves[name], err_msg=name)


def _leaves(tree) -> list[tuple[str, np.ndarray]]:
    import jax

    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    return [(jax.tree_util.keystr(k), np.asarray(v)) for k, v in flat]


@pytest.fixture(scope="module")
def finetuned(gcs_env, phase2, tmp_path_factory) -> dict:
    import importlib.util

    spec = importlib.util.spec_from_file_location("wo", ROOT / "experiments" / "word_order.py")
    word_order = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(word_order)
    local = tmp_path_factory.mktemp("gcs_word_order")
    word_order.write_cola_layout(str(local), num_train=32, num_dev=24, seed=0)
    for name in ("train.tsv", "dev.tsv"):
        _gs(f"word_order/{name}").write_text((local / name).read_text())
    workdir = f"gs://{BUCKET}/ft"
    out = _run(gcs_env, [
        "finetune", "--config", "experiments/configs/glue.py:cola", f"--workdir={workdir}",
        f"--config.init_checkpoint={phase2}", f"--config.data_dir=gs://{BUCKET}/word_order",
        f"--config.max_seq_length={SEQ}", "--config.train_batch_size=8",
        "--config.num_train_epochs=1", "--config.num_devices=1", "--config.log_every_steps=2",
    ]).stdout  # fmt: skip
    return {"workdir": workdir, "printed": json.loads(out[out.rindex("{") :])}


def test_finetune_from_gcs_writes_results_to_gcs(finetuned):
    results = json.loads(_gs("ft/eval_results.json").read_text())
    assert results == finetuned["printed"]
    assert results["train_steps"] == 4.0  # 32 examples / batch 8 x 1 epoch
    labels = [int(line.split("\t")[1]) for line in _gs("word_order/dev.tsv").read_text().split("\n")
              if line]  # fmt: skip
    preds = [int(line.split("\t")[1]) for line in
             _gs("ft/dev_predictions.tsv").read_text().splitlines()[1:]]  # fmt: skip
    assert len(preds) == len(labels) == 24
    assert results["accuracy"] == pytest.approx(np.mean(np.equal(preds, labels)))
    assert len(_gs("ft/metrics.jsonl").read_text().splitlines()) == 2  # steps 2 and 4


def test_convert_from_gcs_loads_in_transformers(gcs_env, phase1, phase2, tmp_path):
    import transformers

    from bert_jax.checkpoint import restore_params

    _run(gcs_env, ["convert", f"--init_checkpoint={phase2}", f"--output_dir={tmp_path}"])
    model = transformers.BertForPreTraining.from_pretrained(tmp_path)
    _, p1 = restore_params(phase1["workdir"])
    ours = p1["bert"]["embeddings"]["word_embeddings"]["embedding"]
    theirs = model.bert.embeddings.word_embeddings.weight.detach().numpy()
    np.testing.assert_array_equal(theirs, ours)
    assert (tmp_path / "vocab.txt").read_text() == _gs("vocab/vocab.txt").read_text()


def test_second_run_on_a_gcs_workdir_is_refused(gcs_env, shards):
    """The lease object on gs:// (there is no flock there): a run holding it (this process) keeps
    `bert-jax pretrain` out with one line, before it writes anything; released, the next run may
    take the workdir."""
    from bert_jax.train.lock import WorkdirLock

    workdir = f"gs://{BUCKET}/busy"
    holder = WorkdirLock(workdir, settle_seconds=0.5).acquire()
    try:
        assert json.loads(_gs("busy/.lock.json").read_text())["pid"] == os.getpid()
        proc = _run(gcs_env, _pretrain_args(workdir), background=True)
        out = proc.communicate(timeout=600)[0]
        assert proc.returncode == 2, out[-3000:]  # bert-jax: error: ...
        error = out.strip().splitlines()[-1]
        assert f"{workdir}: in use by another run (pid {os.getpid()} on " in error
        assert not _gs("busy/metrics.jsonl").exists() and not _gs("busy/config.json").exists()
    finally:
        holder.release()
    assert not _gs("busy/.lock.json").exists()
    WorkdirLock(workdir, settle_seconds=0.5).acquire().release()
