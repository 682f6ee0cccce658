"""`bert-jax create-pretraining-data`: raw text -> TFRecord pretraining shards + stats.json.

Flags named, defaulted and parsed as google-research/bert's create_pretraining_data.py, plus:

  bert-jax create-pretraining-data --input_file='corpus/*.txt' --vocab_file=vocab.txt \\
      --output_dir=shards --num_shards=64 --num_workers=8          # fast, streaming (default)
  bert-jax create-pretraining-data --input_file=a.txt --output_file=a.tfrecord \\
      --vocab_file=vocab.txt --reference_compat                     # the reference's exact output
  ... --runner=beam --beam_pipeline_options=runner=DataflowRunner,project=P,region=R,...

--input_file also takes `embedded:` / `embedded:N` (the stdlib-docstring corpus, no download) and
`tfds:NAME[:SPLIT][#FEATURE]`. See bert_jax/data/pipeline.py and the README's "Pretraining data".

Features written (int64 unless noted; padded with 0):
  default (static masks), every --objective:
    input_ids, input_mask, segment_ids             [max_seq_length]
    masked_lm_positions, masked_lm_ids             [max_predictions_per_seq]
    masked_lm_weights (float)                      [max_predictions_per_seq]
    next_sentence_labels                           [1]
  --dynamic_masking: input_ids, input_mask, segment_ids, next_sentence_labels only.
  --pack_sequences=S (S > 1): up to S instances per record, short ones sharing a row; adds
    pack_ids [max_seq_length] (the instance of each token: 1..S, 0 on padding) after
    segment_ids, and next_sentence_labels is [S] (one label per instance slot, 0 when empty).
    Pretraining reads S from the shards' stats.json. Objectives packed across documents
    (full_sentences, modernbert) then stop each segment at its document's end instead, so
    attention never crosses a document (RoBERTa's DOC-SENTENCES, packed back to full rows).
next_sentence_labels: nsp 1 = B is a random span of another document; sop 1 = A/B swapped (a
one-sentence chunk takes a random B, as ALBERT's code); full_sentences and doc_sentences
(packed within one document) always 0 (one segment).
Next to the shards: stats.json.

Encoder-decoder objectives (T5; bert_jax/data/seq2seq_pipeline.py): --objective=span_corruption
or prefix_lm with --spm_model=spiece.model (`build-vocab --t5_spiece_size=N`) instead of
--vocab_file; --max_seq_length is the inputs length, the targets length follows from the
objective (span_corruption: T5's random_spans_helper, 512 -> 114; prefix_lm: the same as inputs):
    inputs [max_seq_length], targets [targets length]   int64, zero-padded, both end with EOS
"""

from __future__ import annotations

from absl import flags, logging

from bert_jax import objectives

FLAGS = flags.FLAGS

flags.DEFINE_string(
    "input_file",
    None,
    "Comma-separated globs of text files (local, gs://), "
    "`embedded:` or `tfds:NAME[:SPLIT][#FEATURE]`.",
)
flags.DEFINE_string(
    "output_file", None, "Comma-separated output TFRecord files (instances spread over them)."
)
flags.DEFINE_string("vocab_file", None, "The WordPiece vocab.txt.")
flags.DEFINE_string(
    "spm_model", None, "T5 sentencepiece model (spiece.model), for span_corruption / prefix_lm."
)
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (uncased models).")
flags.DEFINE_bool("do_whole_word_mask", False, "Mask all WordPieces of a word together.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10, "Times to duplicate the input data (different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float(
    "mask_prob", None, "Of the selected tokens, the fraction set to [MASK] (default 0.8)."
)
flags.DEFINE_float(
    "random_prob", None, "Of the selected tokens, the fraction set to a random token (0.1)."
)
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter-than-maximum target length.")

flags.DEFINE_string("output_dir", None, "Write shard-0000i-of-0000N.tfrecord here (fast mode).")
flags.DEFINE_integer("num_shards", 1, "Number of shards with --output_dir.")
flags.DEFINE_integer("num_workers", 1, "Worker processes in fast mode (output is the same).")
flags.DEFINE_bool(
    "reference_compat",
    False,
    "One process, one random.Random: the reference's "
    "exact instances and order (holds the corpus in memory).",
)
flags.DEFINE_enum(
    "objective",
    "nsp",
    list(dict.fromkeys(objectives.data_flags() + objectives.names())),
    "nsp (BERT), sop (ALBERT sentence order), full_sentences (RoBERTa, no NSP), or any name of "
    "the objectives registry (bert_jax/objectives/: mlm_nsp, mlm, mlm_sop, ...).",
)
flags.DEFINE_bool(
    "dynamic_masking",
    False,
    "Write unmasked instances (no masked_lm_* features); "
    "the input pipeline masks at training time.",
)
flags.DEFINE_integer(
    "pack_sequences",
    1,
    "Instances per record: > 1 packs short instances into shared rows (pack_ids keeps each "
    "one's attention to itself; full_sentences/modernbert segments then stop at document "
    "ends); 1 = the reference's one instance per record.",
)
flags.DEFINE_enum("runner", "local", ["local", "beam"], "local processes or Apache Beam.")
flags.DEFINE_list(
    "beam_pipeline_options",
    [],
    "Beam options without the leading --, e.g. "
    "runner=DataflowRunner,project=P,region=R,temp_location=gs://b/tmp.",
)
flags.DEFINE_integer("max_line_chars", 100_000, "Longer lines are cut at whitespace (0 = never).")
flags.DEFINE_integer("block_bytes", 1 << 18, "Fast mode: text per unit of work (whole documents).")


def main(argv: list[str]) -> None:
    from bert_jax.data.pipeline import create_pretraining_data
    from bert_jax.errors import BertJaxError

    if len(argv) > 1:
        raise BertJaxError(f"unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.random_seed < 0:  # numpy's seeding (span corruption) refuses it mid-run
        raise BertJaxError(f"--random_seed={FLAGS.random_seed}: must be >= 0")
    if objectives.is_seq2seq(FLAGS.objective):
        _seq2seq_main()
        return
    for name in ("input_file", "vocab_file"):
        if not getattr(FLAGS, name):
            raise BertJaxError(f"--{name} is required")
    if not FLAGS.output_file and not FLAGS.output_dir:
        raise BertJaxError("--output_file or --output_dir is required")
    output_files = [f for f in FLAGS.output_file.split(",") if f] if FLAGS.output_file else None
    summary = create_pretraining_data(
        FLAGS.input_file,
        FLAGS.output_dir,
        FLAGS.vocab_file,
        output_files=output_files,
        num_shards=FLAGS.num_shards,
        do_lower_case=FLAGS.do_lower_case,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        seed=FLAGS.random_seed,
        dupe_factor=FLAGS.dupe_factor,
        masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
        objective=FLAGS.objective,
        mask_prob=FLAGS.mask_prob,
        random_prob=FLAGS.random_prob,
        dynamic_masking=FLAGS.dynamic_masking,
        pack_sequences=FLAGS.pack_sequences,
        reference_compat=FLAGS.reference_compat,
        num_workers=FLAGS.num_workers,
        runner=FLAGS.runner,
        beam_options=[f"--{o}" for o in FLAGS.beam_pipeline_options],
        max_line_chars=FLAGS.max_line_chars,
        block_bytes=FLAGS.block_bytes,
    )
    logging.info("stats: %s", {k: summary[k] for k in ("instances", "tokens", "masked_fraction")})
    print(
        f"wrote {summary['instances']} instances ({summary['tokens']} tokens) in "
        f"{summary['records']} records to "
        f"{len(summary['output_files'])} file(s); stats.json next to them"
    )


def _seq2seq_main() -> None:
    from bert_jax.data.seq2seq_pipeline import create_seq2seq_data
    from bert_jax.errors import BertJaxError

    for name in ("input_file", "spm_model"):
        if not getattr(FLAGS, name):
            raise BertJaxError(f"--{name} is required with --objective={FLAGS.objective}")
    if not FLAGS.output_file and not FLAGS.output_dir:
        raise BertJaxError("--output_file or --output_dir is required")
    if FLAGS.runner != "local" or FLAGS.reference_compat:
        raise BertJaxError(f"--objective={FLAGS.objective}: only the local runner, no "
                           "--reference_compat")  # fmt: skip
    output_files = [f for f in FLAGS.output_file.split(",") if f] if FLAGS.output_file else None
    summary = create_seq2seq_data(
        FLAGS.input_file, FLAGS.output_dir, FLAGS.spm_model, objective=FLAGS.objective,
        inputs_length=FLAGS.max_seq_length, num_shards=FLAGS.num_shards,
        output_files=output_files, seed=FLAGS.random_seed, max_line_chars=FLAGS.max_line_chars,
        block_bytes=FLAGS.block_bytes,
    )  # fmt: skip
    settings = summary["settings"]
    print(
        f"wrote {summary['instances']} {FLAGS.objective} examples (inputs "
        f"{settings['inputs_length']}, targets {settings['targets_length']} tokens) to "
        f"{len(summary['output_files'])} file(s); stats.json next to them"
    )
