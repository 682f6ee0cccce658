"""Input pipeline throughput: our Grain reader vs tf.data with the reference's parse, one run.

  python experiments/bench/bench_input.py [--records 20000] [--seconds 6]

Writes TFRecord shards at 128 tokens / 20 predictions with TensorFlow into a temp dir (static
masks, and unmasked ones for dynamic masking), then reads each for about --seconds and prints
sequences/s of wall time and per CPU-second of this process ("per core": robust to other load on
a shared machine and counts every thread the pipeline uses). Target: >= 10k seq/s per core.

Rows:
  ours static / dynamic        PretrainInput(..., sharding=None) -> numpy batches, 1 thread
  ours static, no CRC check    the same with verify_crc=False (the default checks both CRCs)
  ours static -> jax.Array     the same plus jax.make_array_from_process_local_data (1 device)
  tf.data reference            run_pretraining.py input_fn: interleave 4 files, shuffle(100),
                               map(parse_single_example) + batch, int64 -> int32; 1 thread
  tf.data reference (all)      the same with tf.data's default thread pools (all cores)

Below the table: what the CRC checks cost, for the whole reader and for the TFRecord reader
alone (bert_jax.shards.tfrecord.RecordReader, records/s and MB/s of payload).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402
import numpy as np  # noqa: E402

from bert_jax.input import MaskingSpec, PretrainInput  # noqa: E402
from bert_jax.shards.tfrecord import RecordReader  # noqa: E402

L, P, BATCH, FILES = 128, 20, 256, 4


def write_shards(directory: str, records: int, with_mlm: bool) -> list[str]:
    import tensorflow as tf

    rng = np.random.default_rng(0)

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    paths = [f"{directory}/train-{i:05d}.tfrecord" for i in range(FILES)]
    writers = [tf.io.TFRecordWriter(p) for p in paths]
    for r in range(records):
        # 90% full-length sequences, as the reference's short_seq_prob=0.1.
        n = L if rng.random() < 0.9 else int(rng.integers(10, L))
        ids = np.zeros(L, np.int64)
        ids[:n] = rng.integers(1000, 30522, n)
        ids[[0, n // 2, n - 1]] = [101, 102, 102]
        feature = {
            "input_ids": ints(ids.tolist()),
            "input_mask": ints([1] * n + [0] * (L - n)),
            "segment_ids": ints([0] * (n // 2 + 1) + [1] * (n - n // 2 - 1) + [0] * (L - n)),
        }
        if with_mlm:
            pos = np.sort(rng.choice(np.arange(1, n - 1), size=min(P, n - 2), replace=False))
            pad = P - pos.size
            feature["masked_lm_positions"] = ints(pos.tolist() + [0] * pad)
            feature["masked_lm_ids"] = ints(ids[pos].tolist() + [0] * pad)
            feature["masked_lm_weights"] = tf.train.Feature(
                float_list=tf.train.FloatList(value=[1.0] * pos.size + [0.0] * pad)
            )
        feature["next_sentence_labels"] = ints([int(rng.integers(2))])
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        writers[r % FILES].write(example.SerializeToString())
    for w in writers:
        w.close()
    return paths


def measure(batches, seconds: float) -> tuple[float, float]:
    """(sequences per wall second, sequences per CPU second) after one warm-up batch."""
    it = iter(batches)
    next(it)
    n, wall, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - wall < seconds:
        jax.block_until_ready(next(it))
        n += BATCH
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return n / wall, n / cpu


def records_only(files: list[str], verify: bool, seconds: float) -> tuple[float, float]:
    """(records, payload bytes) per CPU second of RecordReader passes over `files`."""
    n = size = 0
    wall, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - wall < seconds:
        for path in files:
            with RecordReader(path, verify=verify) as reader:
                for record in reader:
                    n += 1
                    size += len(record)
    cpu = time.process_time() - cpu
    return n / cpu, size / cpu


def tf_reference(files: list[str], one_thread: bool):
    """run_pretraining.py's input_fn (is_training=True), in TF2 spelling."""
    import tensorflow as tf

    spec = {k: tf.io.FixedLenFeature([L], tf.int64) for k in ("input_ids", "input_mask")}
    spec["segment_ids"] = tf.io.FixedLenFeature([L], tf.int64)
    spec["masked_lm_positions"] = tf.io.FixedLenFeature([P], tf.int64)
    spec["masked_lm_ids"] = tf.io.FixedLenFeature([P], tf.int64)
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([P], tf.float32)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)

    def decode(record):
        example = tf.io.parse_single_example(record, spec)
        return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in example.items()}

    d = tf.data.Dataset.from_tensor_slices(tf.constant(files)).repeat().shuffle(len(files))
    d = d.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(4, len(files)),
        num_parallel_calls=1 if one_thread else tf.data.AUTOTUNE,
        deterministic=False,
    )
    d = d.shuffle(100).map(decode, num_parallel_calls=1 if one_thread else tf.data.AUTOTUNE)
    d = d.batch(BATCH, drop_remainder=True).prefetch(1 if one_thread else tf.data.AUTOTUNE)
    options = tf.data.Options()
    if one_thread:
        options.threading.private_threadpool_size = 1
        options.autotune.enabled = False
    d = d.with_options(options)
    return (b for b in d.as_numpy_iterator())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    import google.protobuf
    import grain
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(f"{tmp}/static")
        os.makedirs(f"{tmp}/unmasked")
        static = write_shards(f"{tmp}/static", args.records, True)
        unmasked = write_shards(f"{tmp}/unmasked", args.records, False)
        spec = MaskingSpec(mask_id=103, vocab_size=30522, special_ids=(101, 102, 0))
        sharding = jax.NamedSharding(jax.make_mesh((1,), ("data",)), jax.P("data"))

        def ours(files, **kw):
            return PretrainInput(files, BATCH, L, P, seed=0, prefetch=0, **kw)

        rows = [
            ("ours static (numpy)", ours(static)),
            ("ours static, no CRC check", ours(static, verify_crc=False)),
            ("ours dynamic masking (numpy)", ours(unmasked, dynamic_masking=spec)),
            ("ours static -> jax.Array", ours(static, sharding=sharding)),
            ("ours dynamic -> jax.Array", ours(unmasked, dynamic_masking=spec, sharding=sharding)),
            ("tf.data reference, 1 thread", tf_reference(static, one_thread=True)),
            ("tf.data reference, all threads", tf_reference(static, one_thread=False)),
        ]
        results = [(name, *measure(batches, args.seconds)) for name, batches in rows]
        crc = {v: records_only(static, v, args.seconds / 2) for v in (True, False)}

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
        f"(shared), python {platform.python_version()}; jax {jax.__version__}, grain "
        f"{grain.__version__}, tensorflow "
        f"{tf.__version__}, protobuf {google.protobuf.__version__}, numpy {np.__version__}"
    )
    print(
        f"seq length {L}, {P} predictions, batch {BATCH}, {FILES} files x {args.records // FILES}"
    )
    ref = results[5][2]
    print(f"| {'reader':32} | {'seq/s (wall)':>12} | {'seq/s per core':>14} | vs tf 1 thread |")
    print(f"|{'-' * 34}|{'-' * 14}|{'-' * 16}|{'-' * 16}|")
    for name, wall, per_core in results:
        print(f"| {name:32} | {wall:12,.0f} | {per_core:14,.0f} | {per_core / ref:13.2f}x |")
    print(
        f"CRC checks: ours static runs at {results[0][2] / results[1][2]:.2f}x its speed without "
        "them (per core); the TFRecord reader alone: "
        + ", ".join(
            f"{'verified' if v else 'unverified'} {n:,.0f} records/s ({b / 1e6:,.0f} MB/s)"
            for v, (n, b) in crc.items()
        )
        + f" per core, ratio {crc[True][0] / crc[False][0]:.2f}"
    )


if __name__ == "__main__":
    main()
