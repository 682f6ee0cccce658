"""`bert-jax attention-map`: a PNG heatmap of one layer's head for a sentence (or pair).

  bert-jax attention-map --init_checkpoint=path/to/hf_dir --layer=-1 --head=0 \\
    --text="The cat sat on the mat." --output_file=attention.png

Rows are query tokens, columns the tokens they attend to; each row sums to 1. `--head=-1`
averages the heads of the layer.
"""

from __future__ import annotations

from absl import flags

from bert_jax.errors import BertJaxError

FLAGS = flags.FLAGS
flags.DEFINE_string("init_checkpoint", None, "TF checkpoint prefix, HF directory or workdir.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json (default: beside the checkpoint).")
flags.DEFINE_string("vocab_file", None, "vocab.txt (default: the one inside the checkpoint).")
flags.DEFINE_bool(
    "do_lower_case",
    True,
    "Lower-case the input (uncased models). Unset: the checkpoint's own setting if it records one.",
)
flags.DEFINE_string("text", None, "The sentence (text_a).")
flags.DEFINE_string("text_b", None, "Optional second segment.")
flags.DEFINE_integer("layer", -1, "Transformer layer, 0-based; negative counts from the top.")
flags.DEFINE_integer("head", 0, "Attention head, 0-based; -1 averages all heads.")
flags.DEFINE_string("output_file", "attention.png", "Where to write the PNG.")


def main(argv: list[str]) -> None:
    del argv
    for name in ("init_checkpoint", "text"):
        if not getattr(FLAGS, name):
            raise BertJaxError(f"--{name} is required")
    from bert_jax.features import plot_attention
    from bert_jax.features.commands import attention_map

    lower = FLAGS.do_lower_case if FLAGS["do_lower_case"].present else None
    tokens, probs_LxL, layer, head = attention_map(
        FLAGS.init_checkpoint, FLAGS.text, FLAGS.text_b, FLAGS.layer, FLAGS.head, lower,
        FLAGS.bert_config_file, FLAGS.vocab_file,
    )  # fmt: skip
    plot_attention(tokens, probs_LxL, FLAGS.output_file, f"layer {layer}, {head}")
    print(f"wrote {FLAGS.output_file} ({len(tokens)} tokens, layer {layer}, {head})")
