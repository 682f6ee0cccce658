"""`bert-jax build-vocab`: train a WordPiece vocab.txt (for FullTokenizer) and a sentencepiece
model (spm.model, for ALBERT-style tokenization) on text in the reference's input format.

    bert-jax build-vocab --input_file='wiki-*.txt,books.txt' --vocab_size=30522 \\
        --output_dir=vocab/ --do_lower_case
    bert-jax build-vocab --input_file=embedded: --vocab_size=8000 --output_dir=/tmp/vocab

    bert-jax build-vocab --kind=byte_bpe --input_file=embedded: --vocab_size=50265 \\
        --output_dir=/tmp/roberta-vocab      # RoBERTa: vocab.json + merges.txt

Writes vocab.txt, spm.model, spm.vocab and vocab_stats.json (including the [UNK] rate of
FullTokenizer with the new vocab on the corpus) and prints the stats.
"""

from __future__ import annotations

import json

from absl import flags

from bert_jax.errors import BertJaxError

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "input_file", None, "Comma-separated globs of text files (local or gs://), or embedded:[N]."
)
flags.DEFINE_enum(
    "kind", "wordpiece", ["wordpiece", "byte_bpe"],
    "wordpiece: vocab.txt + spm.model (BERT, ALBERT); byte_bpe: RoBERTa's byte-level BPE, "
    "vocab.json + merges.txt (tokenizers).",
)  # fmt: skip
flags.DEFINE_integer("vocab_size", 30522, "Entries in vocab.txt (and pieces in spm.model).")
flags.DEFINE_string(
    "output_dir",
    None,
    "Directory for vocab.txt, spm.model, spm.vocab (byte_bpe: vocab.json, merges.txt).",
)
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents before learning pieces.")
flags.DEFINE_integer("num_unused", 0, "Number of [unusedN] tokens after the special tokens.")
flags.DEFINE_enum("model_type", "bpe", ["bpe", "unigram"], "sentencepiece model type.")
flags.DEFINE_integer(
    "input_sentence_size", 1_000_000, "Lines sentencepiece samples from the corpus for training."
)
flags.DEFINE_integer("num_threads", None, "sentencepiece training threads (default: all cores).")
flags.DEFINE_integer(
    "t5_spiece_size", 0,
    "> 0: also write spiece.model, a T5-layout sentencepiece model (pad 0, eos 1, unk 2) of "
    "this many pieces; T5's 100 sentinels <extra_id_N> are numbered above it.",
)  # fmt: skip


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise BertJaxError(f"unexpected arguments: {' '.join(argv[1:])}")
    for name in ("input_file", "output_dir"):
        if not getattr(FLAGS, name):
            raise BertJaxError(f"--{name} is required")
    if FLAGS.kind == "byte_bpe":
        if FLAGS.t5_spiece_size > 0:
            raise BertJaxError("--t5_spiece_size: a sentencepiece model; use --kind=wordpiece")
        from bert_jax.tokenization.byte_bpe_builder import build_byte_bpe

        stats = build_byte_bpe(FLAGS.input_file, FLAGS.vocab_size, FLAGS.output_dir)
        print(json.dumps(stats, indent=2))
        return
    from bert_jax.tokenization.vocab_builder import build_vocab

    t5_model = None
    if FLAGS.t5_spiece_size > 0:  # first, in memory: refused, it leaves the earlier files whole
        from bert_jax.tokenization.t5_vocab import t5_spiece_model

        t5_model = t5_spiece_model(FLAGS.input_file, FLAGS.t5_spiece_size)
    stats = build_vocab(
        FLAGS.input_file,
        vocab_size=FLAGS.vocab_size,
        output_dir=FLAGS.output_dir,
        do_lower_case=FLAGS.do_lower_case,
        num_unused=FLAGS.num_unused,
        model_type=FLAGS.model_type,
        input_sentence_size=FLAGS.input_sentence_size,
        num_threads=FLAGS.num_threads,
    )
    if t5_model is not None:
        from bert_jax.tokenization.t5_vocab import T5Vocab, write_t5_spm

        spm = write_t5_spm(FLAGS.output_dir, t5_model)
        vocab = T5Vocab(spm)
        stats["t5_spiece"] = {"path": str(spm), "pieces": vocab.pieces, "vocab_size": vocab.size,
                              "sentinel_0": vocab.sentinel(0)}  # fmt: skip
    print(json.dumps(stats, indent=2))
