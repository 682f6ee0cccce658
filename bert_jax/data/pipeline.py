"""create-pretraining-data: the reference-compatible runner, the fast local runner (N processes
over the block function of bert_jax/data/blocks.py) and the public entry point, which hands the
blocks to Beam (bert_jax/data/beam_pipeline.py) with --runner=beam.

Reference-compatible mode holds the corpus in memory and consumes one `random.Random(seed)` in the
reference's order: same instances, same order, same round-robin files as google-research/bert.

Fast mode streams: the input is cut into blocks of whole documents (~`block_bytes`, chosen from
the bytes alone), each block is tokenized in one batch call and turned into instances with random
streams keyed by (seed, source, block, dupe pass); random-next B spans come from another document
of the same block, and instances are shuffled within the block. The main process writes the
records of block after block; record j of block (s, b) goes to shard (s*1000003 + b*7919 + j) mod
num_shards. So the shards are identical whatever --num_workers (and for the Beam runner), and
memory is bounded by the blocks in flight (2 per worker), not by the corpus. Unlike the
reference, a document ends at the end of its file.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import dataclasses
import logging
import multiprocessing
import os
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool

from etils import epath

from bert_jax import objectives
from bert_jax.atomic_write import write_text_atomic
from bert_jax.corpus import sources as text_sources
from bert_jax.data import beam_pipeline, stats
from bert_jax.data.blocks import (
    Settings,
    decode_lines,
    group_documents,
    load_tokenizer,
    process_block,
    shard_of,
)
from bert_jax.data.instances import (
    InstanceConfig,
    build_instances,
    instance_features,
    mask_reference,
)
from bert_jax.data.shard_outputs import (
    ShardSet,
    remove_other_shard_sets,
    remove_stale_temporaries,
    shard_paths,
)
from bert_jax.errors import BertJaxError
from bert_jax.shards.example import encode
from bert_jax.tokenization.vocab import load_vocab

log = logging.getLogger(__name__)


def check_config(cfg: InstanceConfig, dupe_factor: int) -> None:
    if cfg.max_seq_length < 5:
        raise BertJaxError(
            f"--max_seq_length={cfg.max_seq_length}: needs at least 5 ([CLS] A [SEP] B [SEP])"
        )
    if not cfg.dynamic_masking and cfg.max_predictions_per_seq < 1:
        raise BertJaxError(f"--max_predictions_per_seq={cfg.max_predictions_per_seq}: must be >= 1")
    if not 0.0 < cfg.masked_lm_prob < 1.0:
        raise BertJaxError(f"--masked_lm_prob={cfg.masked_lm_prob}: must be in (0, 1)")
    if not 0.0 <= cfg.short_seq_prob <= 1.0:
        raise BertJaxError(f"--short_seq_prob={cfg.short_seq_prob}: must be in [0, 1]")
    if dupe_factor < 1:
        raise BertJaxError(f"--dupe_factor={dupe_factor}: must be >= 1")
    mask_prob, random_prob = cfg.mask_prob or 0.0, cfg.random_prob or 0.0
    if not (0.0 <= mask_prob <= 1.0 and 0.0 <= random_prob <= 1.0) or mask_prob + random_prob > 1:
        raise BertJaxError(
            f"--mask_prob={cfg.mask_prob} --random_prob={cfg.random_prob}: each must be in "
            "[0, 1] and their sum at most 1 (the rest of the selected tokens stay unchanged)"
        )
    objectives.check_pack_sequences(cfg.objective, cfg.pack_sequences, "--pack_sequences")
    most = cfg.max_seq_length // 3  # an instance holds [CLS], a token and [SEP] at the least
    if cfg.pack_sequences > most:  # slots no row can fill: per-slot arrays in every record
        raise BertJaxError(
            f"--pack_sequences={cfg.pack_sequences}: a row of --max_seq_length="
            f"{cfg.max_seq_length} tokens holds at most {most} instances (3 tokens each at the "
            f"least); use --pack_sequences={most} or fewer"
        )
    wanted = round(cfg.max_seq_length * cfg.masked_lm_prob)
    if not cfg.dynamic_masking and cfg.max_predictions_per_seq < wanted:
        log.warning(
            "--max_predictions_per_seq=%d is below max_seq_length * masked_lm_prob = %d: long "
            "instances get only %d masked positions (as in the reference); stats.json counts "
            "them as capped_instances",
            cfg.max_predictions_per_seq,
            wanted,
            cfg.max_predictions_per_seq,
        )


# ---------------------------------------------------------------- fast mode


_WORKER: dict = {}


def _exit_with_parent(parent: int) -> None:
    """A worker whose parent died (SIGKILL, OOM) would otherwise wait on its queue forever."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _init_worker(settings: Settings, rust_threads: int, parent: int) -> None:
    # `parent` is the main process's pid as it passed it: a worker still starting up when the
    # parent died must not take its new parent (init) for the one to watch.
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    # Split the cores between the workers' tokenizer thread pools (read at first use).
    os.environ["RAYON_NUM_THREADS"] = str(rust_threads)
    _WORKER["settings"] = settings
    _WORKER["tok"] = load_tokenizer(settings)


def _work(s: int, b: int, data: bytes):
    tokenizer, vocab = _WORKER["tok"]
    return process_block(_WORKER["settings"], tokenizer, vocab, s, b, data)


def _result(fut: cf.Future, pool: cf.ProcessPoolExecutor):
    """`fut.result()`, or BrokenProcessPool as soon as a worker has died. The executor notices a
    death only between messages: a worker killed while sending its (large) result leaves the
    executor's reader waiting for the rest forever, and `fut` would never finish."""
    while True:
        try:
            return fut.result(timeout=0.5)
        except cf.TimeoutError:
            # The executor's own process table (CPython's, not public API).
            if any(p.exitcode is not None for p in list(pool._processes.values())):
                raise BrokenProcessPool("a worker process died") from None


def _stop_broken(pool: cf.ProcessPoolExecutor) -> None:
    """Kill every worker and unblock the executor's reader (the parent holds the result pipe's
    write end too, so without closing it a half-read message never ends), so that shutting the
    executor down cannot hang."""
    for proc in list(pool._processes.values()):
        proc.kill()
    for proc in list(pool._processes.values()):
        proc.join(timeout=10)
    pool._result_queue._writer.close()


def run_fast(settings: Settings, sources, output_files: list[str], num_workers: int = 1) -> dict:
    cfg = settings.cfg
    total = stats.new_stats(cfg.max_seq_length)
    blocks = text_sources.iter_blocks(sources, settings.block_bytes)
    shards = ShardSet(output_files)
    n = len(output_files)

    def consume(s: int, b: int, result) -> None:
        nonlocal total
        records, st = result
        for j, data in records:
            shards.write(shard_of(s, b, j, n), data)
        total = stats.merge(total, st)

    try:
        if num_workers <= 1:
            tokenizer, vocab = load_tokenizer(settings)
            for s, b, data in blocks:
                consume(s, b, process_block(settings, tokenizer, vocab, s, b, data))
        else:
            load_tokenizer(settings)  # fail fast on a bad vocab, before starting workers
            ctx = multiprocessing.get_context("spawn")
            with cf.ProcessPoolExecutor(
                num_workers,
                mp_context=ctx,
                initializer=_init_worker,
                initargs=(settings, max(1, (os.cpu_count() or 1) // num_workers), os.getpid()),
            ) as pool:
                pending: collections.deque = collections.deque()
                try:
                    for s, b, data in blocks:
                        pending.append((s, b, pool.submit(_work, s, b, data)))
                        if len(pending) >= 2 * num_workers:
                            s0, b0, fut = pending.popleft()
                            consume(s0, b0, _result(fut, pool))
                    while pending:
                        s0, b0, fut = pending.popleft()
                        consume(s0, b0, _result(fut, pool))
                except BrokenProcessPool:
                    _stop_broken(pool)
                    raise
    except BrokenProcessPool as e:
        shards.abort()
        raise BertJaxError(
            "a data worker process died (killed, or out of memory?); no shards were written, "
            "rerun (fewer --num_workers or smaller --block_bytes need less memory)"
        ) from e
    except BaseException:
        shards.abort()
        raise
    shards.close()
    return total


# ---------------------------------------------------------------- reference-compatible mode


def read_documents_reference(settings: Settings, sources, tokenizer, st: dict) -> list:
    """All documents in memory, documents continuing across files, as the reference reads them."""
    lines: list[str] = []
    for source in sources:
        data = b"".join(source.iter_bytes())
        if data.endswith(b"\n"):
            data = data[:-1]  # readline() yields no empty line after the final newline
        if data:
            lines += decode_lines(data, settings, st)
    return group_documents(lines, (tokenizer.encode(line) if line else [] for line in lines), st)


def run_reference_compat(settings: Settings, sources, output_files: list[str]) -> dict:
    cfg = settings.cfg
    tokenizer, vocab = load_tokenizer(settings)
    total = stats.new_stats(cfg.max_seq_length)
    docs = read_documents_reference(settings, sources, tokenizer, total)
    rng = random.Random(settings.random_seed)
    rng.shuffle(docs)
    mask_fn = None if cfg.dynamic_masking else mask_reference
    instances = []
    for _ in range(settings.dupe_factor):
        instances += build_instances("sentence_pairs", docs, cfg, vocab, rng, mask_fn)
    rng.shuffle(instances)
    shards = ShardSet(output_files)
    try:
        for i, inst in enumerate(instances):
            stats.add_instance(total, inst, cfg)
            shards.write(i % len(output_files), encode(instance_features(inst, cfg)))
    except BaseException:
        shards.abort()
        raise
    shards.close()
    return total


# ---------------------------------------------------------------- public API


def create_pretraining_data(
    input_files: str | list[str],
    output_dir: str | None,
    vocab_file: str,
    *,
    output_files: list[str] | None = None,
    num_shards: int = 1,
    do_lower_case: bool = True,
    do_whole_word_mask: bool = False,
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    seed: int = 12345,
    dupe_factor: int = 10,
    masked_lm_prob: float = 0.15,
    short_seq_prob: float = 0.1,
    objective: str = "nsp",
    mask_prob: float | None = None,
    random_prob: float | None = None,
    dynamic_masking: bool = False,
    pack_sequences: int = 1,
    reference_compat: bool = False,
    num_workers: int = 1,
    runner: str = "local",
    beam_options: list[str] | None = None,
    max_line_chars: int = 100_000,
    block_bytes: int = 1 << 18,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Text corpus -> TFRecord shards + stats.json; returns the stats dict.

    Shards are `<output_dir>/shard-0000i-of-0000N.tfrecord` unless `output_files` is given
    (instances round-robin / keyed across them, as --output_file). stats.json goes next to them.
    """
    try:
        spec = objectives.get(objective)
    except BertJaxError as e:
        raise BertJaxError(f"--objective: {e}") from None
    if objectives.is_seq2seq(spec.name):
        raise BertJaxError(
            f"--objective={objective}: an encoder-decoder objective, written by "
            "bert_jax.data.seq2seq_pipeline.create_seq2seq_data (--spm_model)"
        )
    cfg = InstanceConfig(
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob,
        short_seq_prob=short_seq_prob,
        do_whole_word_mask=do_whole_word_mask,
        objective=spec.name,
        dynamic_masking=dynamic_masking or spec.masking is None,
        mask_prob=mask_prob,
        random_prob=random_prob,
        pack_sequences=pack_sequences,
    )
    check_config(cfg, dupe_factor)
    for flag, value, least in (
        ("num_workers", num_workers, 1), ("block_bytes", block_bytes, 1),
        ("max_line_chars", max_line_chars, 0),
    ):  # fmt: skip
        if value < least:  # block_bytes <= 0 never cuts a block; max_line_chars < 0 never ends
            raise BertJaxError(f"--{flag}={value}: must be >= {least}")
    if output_files is None:
        if output_dir is None:
            raise BertJaxError("give --output_dir (with --num_shards) or --output_file")
        if num_shards < 1:
            raise BertJaxError(f"--num_shards={num_shards}: must be >= 1")
        output_files = shard_paths(output_dir, num_shards)
    stats_dir = epath.Path(output_dir) if output_dir else epath.Path(output_files[0]).parent
    if reference_compat and (spec.pairing != "sentence_pairs" or runner != "local"):
        raise BertJaxError("--reference_compat supports only --objective=nsp and the local runner")
    if reference_compat and pack_sequences > 1:
        raise BertJaxError(
            "--reference_compat writes one instance per record: drop --pack_sequences"
        )
    if reference_compat and (mask_prob, random_prob) not in ((None, None), (0.8, 0.1)):
        raise BertJaxError("--reference_compat masks 80/10/10 as the reference: drop --mask_prob")
    settings = Settings(
        vocab_file=str(vocab_file),
        cfg=cfg,
        do_lower_case=do_lower_case,
        random_seed=seed,
        dupe_factor=dupe_factor,
        max_line_chars=max_line_chars,
        block_bytes=block_bytes,
    )
    sources = text_sources.resolve_inputs(input_files)
    text_sources.check_text(sources)
    try:
        for d in {stats_dir, *(epath.Path(f).parent for f in output_files)}:
            d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BertJaxError(
            f"{e.filename or stats_dir}: cannot create output directory: {e.strerror or e}"
        ) from e
    remove_stale_temporaries(output_files)
    if reference_compat:
        total = run_reference_compat(settings, sources, output_files)
        mode = "reference_compat"
    elif runner == "beam":
        total = beam_pipeline.run(settings, sources, output_files, beam_options or [])
        mode = "beam"
    elif runner == "local":
        total = run_fast(settings, sources, output_files, num_workers)
        mode = "fast"
    else:
        raise BertJaxError(f"--runner={runner}: expected local or beam")
    if total["instances"] == 0:
        log.warning("no instances: the input has no non-empty lines")
    if total.get("invalid_utf8_lines"):
        log.warning(
            "%d input lines were not valid UTF-8: their undecodable bytes were dropped (accented "
            "letters of Latin-1 text, for example); stats.json counts them as invalid_utf8_lines",
            total["invalid_utf8_lines"],
        )
    summary = stats.summarize(
        total,
        cfg,
        {
            "mode": mode,
            "objective": spec.name,
            "features": [
                f.name
                for f in spec.shard_schema(1, 1, not cfg.dynamic_masking, cfg.pack_sequences)
            ],
            "settings": {
                **dataclasses.asdict(cfg),
                "do_lower_case": do_lower_case,
                "random_seed": seed,
                "dupe_factor": dupe_factor,
                "vocab_file": str(vocab_file),
                # Checked by the training reader against its vocab (bert_jax.input.batches).
                "vocab_size": max(load_vocab(vocab_file).values()) + 1,
            },
            "output_files": [os.fspath(p) for p in output_files],
            **text_sources.embedded_fingerprints(sources),
        },
    )
    write_text_atomic(stats_dir / "stats.json", stats.dumps(summary))
    if output_dir is not None:
        remove_other_shard_sets(output_dir, num_shards, log)
    if progress:
        progress(f"wrote {summary['instances']} instances to {len(output_files)} file(s)")
    return summary
