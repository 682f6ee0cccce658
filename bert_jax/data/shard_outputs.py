"""A run's output shards as one set: written under hidden temporary names and renamed only when
every shard is complete (`ShardSet`), temporaries of a killed earlier run removed first, and an
earlier run's shards of another --num_shards removed once this run's are in place. Shared by the
BERT and the seq2seq data pipelines."""

from __future__ import annotations

import logging
import re

from etils import epath

from bert_jax.shards.tfrecord import TFRecordWriter


class ShardSet:
    """All output writers of a run; nothing appears under a final name unless all succeed."""

    def __init__(self, paths: list[str]):
        self.paths = paths
        self.writers: list[TFRecordWriter] = []
        try:
            for p in paths:
                self.writers.append(TFRecordWriter(p))
        except BaseException:
            self.abort()
            raise

    def write(self, shard: int, data: bytes) -> None:
        self.writers[shard].write(data)

    def close(self) -> None:
        try:
            for w in self.writers:
                w.close()
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        for w in self.writers:
            w.abort()


def remove_stale_temporaries(output_files: list[str]) -> None:
    """Hidden `.<shard>.tmp-*` files of an earlier run of these outputs that was killed (a
    killed writer cannot delete its own); a run writing the same outputs at the same time would
    lose its shards anyway."""
    for d in {epath.Path(f).parent for f in output_files}:
        if not d.exists():
            continue
        names = {epath.Path(f).name for f in output_files}
        for tmp in d.glob(".*.tmp-*"):
            stem = tmp.name[1:].split(".tmp-")[0]
            if stem in names or _SHARD_NAME.fullmatch(stem):
                tmp.unlink(missing_ok=True)


_SHARD_NAME = re.compile(r"shard-\d{5}-of-(\d{5})\.tfrecord")


def remove_other_shard_sets(output_dir: str, num_shards: int, logger: logging.Logger) -> None:
    """Shards of an earlier run with another --num_shards would match the same glob as this
    run's and mix two corpora in training: once this run's shards are complete, they go."""
    stale = [
        p for p in epath.Path(output_dir).glob("shard-*-of-*.tfrecord")
        if (m := _SHARD_NAME.fullmatch(p.name)) and int(m.group(1)) != num_shards
    ]  # fmt: skip
    for p in stale:
        p.unlink(missing_ok=True)
    if stale:
        logger.warning(
            "removed %d shard(s) of an earlier run with another --num_shards from %s (e.g. %s)",
            len(stale), output_dir, stale[0].name,
        )  # fmt: skip


def shard_paths(output_dir: str, num_shards: int, prefix: str = "shard") -> list[str]:
    d = epath.Path(output_dir)
    return [str(d / f"{prefix}-{i:05d}-of-{num_shards:05d}.tfrecord") for i in range(num_shards)]
