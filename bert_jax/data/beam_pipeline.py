"""`--runner=beam`: the fast mode's block function as an Apache Beam pipeline.

sources -> blocks of whole documents (per source) -> reshuffle -> process_block (tokenize, build,
mask, serialize) -> group by shard -> each shard written sorted by (source, block, record) with the
atomic TFRecord writer. Blocks, random streams and shard assignment are those of the local fast
runner, so both write identical shards. The DirectRunner is the default; Dataflow, Flink or Spark
are chosen by pipeline options (e.g. runner=DataflowRunner,project=P,region=R,
temp_location=gs://b/tmp; workers then need `pip install bert-jax` via --setup_file or a
container image).
"""

from __future__ import annotations

import json
import uuid

from etils import epath

from bert_jax.corpus import sources as text_sources
from bert_jax.data import stats
from bert_jax.data.blocks import Settings, load_tokenizer, process_block, shard_of
from bert_jax.shards.tfrecord import TFRecordWriter


def run(settings: Settings, sources: list[text_sources.Source], output_files: list[str], options):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    n = len(output_files)
    stats_path = epath.Path(output_files[0]).parent / f".beam-stats-{uuid.uuid4().hex[:8]}.json"

    class Blocks(beam.DoFn):
        def process(self, item):
            s, source = item
            for b, data in text_sources.source_blocks(source, settings.block_bytes):
                yield s, b, data

    class Build(beam.DoFn):
        def setup(self):
            self.tok = load_tokenizer(settings)

        def process(self, item):
            s, b, data = item
            records, st = process_block(settings, *self.tok, s, b, data)
            for j, record in records:
                yield shard_of(s, b, j, n), ((s, b, j), record)
            yield beam.pvalue.TaggedOutput("stats", st)

    def write_shard(item):
        shard, grouped = item
        records = sorted(grouped["records"], key=lambda kv: kv[0])
        with TFRecordWriter(output_files[shard]) as writer:
            for _, record in records:
                writer.write(record)
        return len(records)

    def write_stats(st):
        stats_path.write_text(json.dumps(st))

    empty = stats.new_stats(settings.cfg.max_seq_length)
    with beam.Pipeline(options=PipelineOptions(list(options))) as p:
        built = (
            p
            | "Sources" >> beam.Create(list(enumerate(sources)))
            | "Blocks" >> beam.ParDo(Blocks())
            | "Reshuffle" >> beam.Reshuffle()
            | "Build" >> beam.ParDo(Build()).with_outputs("stats", main="records")
        )
        shard_ids = p | "ShardIds" >> beam.Create([(i, None) for i in range(n)])
        _ = (
            {"records": built.records, "ids": shard_ids}
            | "GroupByShard" >> beam.CoGroupByKey()
            | "Write" >> beam.Map(write_shard)
        )
        _ = (
            built.stats
            | "MergeStats" >> beam.CombineGlobally(_MergeStats(empty))
            | "WriteStats" >> beam.Map(write_stats)
        )
    total = json.loads(stats_path.read_text())
    stats_path.unlink()
    return total


class _MergeStats:
    """A picklable combine function (Beam wraps a callable over an iterable)."""

    def __init__(self, empty: dict):
        self.empty = empty

    def __call__(self, values) -> dict:
        total = self.empty
        for v in values:
            total = stats.merge(total, v)
        return total
