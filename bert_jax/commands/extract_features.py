"""`bert-jax extract-features`: google-research/bert's extract_features.py, same flags and output.

  bert-jax extract-features --input_file=in.txt --output_file=out.jsonl \\
    --init_checkpoint=path/to/hf_dir --layers=-1,-2,-3,-4 --max_seq_length=128

`--init_checkpoint` is a TF checkpoint prefix (with --vocab_file and --bert_config_file, as in the
reference), a Hugging Face directory or a bert-jax workdir (both default to the files inside).
Every family gives features: the BERT family, XLNet (its content stream, in its own layout),
ModernBERT (a Hugging Face directory) and T5 (its encoder's hidden states; one text a line).
"""

from __future__ import annotations

from absl import flags

from bert_jax.errors import BertJaxError

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "One example per line: `text_a` or `text_a ||| text_b`.")
flags.DEFINE_string("output_file", None, "JSON lines, one object per input line.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Layer indexes to write (-1 = last layer).")
flags.DEFINE_string("bert_config_file", None, "bert_config.json (default: beside the checkpoint).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum total tokens including [CLS] and [SEP].")
flags.DEFINE_string("init_checkpoint", None, "TF checkpoint prefix, HF directory or workdir.")
flags.DEFINE_string("vocab_file", None, "vocab.txt (default: the one inside the checkpoint).")
flags.DEFINE_bool(
    "do_lower_case",
    True,
    "Lower-case the input (uncased models). Unset: the checkpoint's own setting if it records one.",
)
flags.DEFINE_integer("batch_size", 32, "Examples per forward pass.")
flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "Compute dtype.")
# Accepted for command-line compatibility with the reference; they change nothing here.
flags.DEFINE_bool("use_tpu", False, "Ignored: JAX uses whatever devices it finds.")
flags.DEFINE_string("master", None, "Ignored.")
flags.DEFINE_integer("num_tpu_cores", 8, "Ignored.")
flags.DEFINE_bool("use_one_hot_embeddings", False, "Ignored.")


def main(argv: list[str]) -> None:
    del argv
    for name in ("input_file", "output_file", "init_checkpoint"):
        if not getattr(FLAGS, name):
            raise BertJaxError(f"--{name} is required")
    if FLAGS.batch_size < 1:
        raise BertJaxError(f"--batch_size={FLAGS.batch_size}: must be >= 1")
    if FLAGS.max_seq_length < 3:  # [CLS] and [SEP] leave no room for a token (as extract.py)
        raise BertJaxError(
            f"--max_seq_length={FLAGS.max_seq_length}: must be >= 3 (two special tokens and one "
            "token)"
        )
    _check_input(FLAGS.input_file)
    try:
        layer_indexes = [int(x) for x in FLAGS.layers.split(",")]
    except ValueError:
        raise BertJaxError(f"--layers={FLAGS.layers}: expected comma-separated integers") from None
    from bert_jax.runs.features import extract_features

    lower = FLAGS.do_lower_case if FLAGS["do_lower_case"].present else None
    n = extract_features(
        FLAGS.init_checkpoint, FLAGS.input_file, FLAGS.output_file, layer_indexes,
        FLAGS.max_seq_length, FLAGS.batch_size, lower, FLAGS.dtype, FLAGS.bert_config_file,
        FLAGS.vocab_file,
    )  # fmt: skip
    print(f"wrote features of {n} examples to {FLAGS.output_file}")


def _check_input(path: str) -> None:
    """An empty input would write an empty output and exit 0: refuse it up front."""
    from etils import epath

    p = epath.Path(path)
    if not p.exists():
        raise BertJaxError(f"--input_file={path}: no such file")
    with p.open("rb") as f:
        if not f.read(1 << 16).strip():
            raise BertJaxError(f"--input_file={path}: no text (the file is empty)")
