"""Two real JAX processes (jax.distributed with a local coordinator, 4 CPU devices each) build
global batches with `jax.make_array_from_process_local_data`; every process's rows must be exactly
what its own files give when read alone, and the processes must agree on the global batch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import cpu_compile
import numpy as np
from test_input_pipeline import L, P, write_shards

from bert_jax.input import PretrainInput

WORKER = textwrap.dedent(
    """
    import json, sys
    import jax, numpy as np
    from jax.experimental import multihost_utils
    jax.config.update("jax_num_cpu_devices", 4)
    port, pid, pattern, L, P = sys.argv[1], int(sys.argv[2]), sys.argv[3], *map(int, sys.argv[4:])
    jax.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=pid)
    from bert_jax.input import PretrainInput
    mesh = jax.make_mesh((4, 2, 1), ("data", "fsdp", "tensor"),
                         axis_types=(jax.sharding.AxisType.Auto,) * 3)
    sharding = jax.NamedSharding(mesh, jax.P(("data", "fsdp")))
    reader = PretrainInput(pattern, 16, L, P, seed=3, sharding=sharding)
    out = []
    for _ in range(3):
        batch = next(reader)
        assert batch["input_ids"].shape == (16, L) and len(jax.devices()) == 8
        shards = [s for s in batch["input_ids"].addressable_shards if s.replica_id == 0]
        shards.sort(key=lambda s: s.index[0].start)
        local = np.concatenate([np.asarray(s.data) for s in shards])
        full = multihost_utils.process_allgather(batch["input_ids"], tiled=True)
        out.append({"local": local.tolist(), "global": np.asarray(full).tolist()})
    print("RESULT " + json.dumps(out))
    jax.distributed.shutdown()
    """
)


def test_two_jax_processes_form_one_global_batch(tmp_path):
    files = write_shards(tmp_path / "shards", with_mlm=True)
    pattern = str(tmp_path / "shards" / "train-*.tfrecord")
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=cpu_compile.FLAGS)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(port), str(pid), pattern, str(L), str(P)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip
        for pid in range(2)
    ]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
        results.append(json.loads(stdout.split("RESULT ", 1)[1]))
    for step in range(3):
        assert results[0][step]["global"] == results[1][step]["global"]
    for pid in range(2):
        alone = PretrainInput(pattern, 16, L, P, seed=3, process_index=pid, process_count=2)
        assert alone.files == files[pid::2]
        for step in range(3):
            expected = next(alone)["input_ids"]
            np.testing.assert_array_equal(np.array(results[pid][step]["local"]), expected)
            global_ids = np.array(results[pid][step]["global"])
            assert any(np.array_equal(global_ids[i : i + 8], expected) for i in (0, 8)), (
                "a process's rows are not one contiguous block of the global batch"
            )
