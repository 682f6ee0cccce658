"""`bert-jax attention-map`: a PNG heatmap of one layer's head for a sentence (or pair).

  bert-jax attention-map --init_checkpoint=path/to/hf_dir --layer=-1 --head=0 \\
    --text="The cat sat on the mat." --output_file=attention.png
  bert-jax attention-map --init_checkpoint=path/to/t5_dir --attention=cross \\
    --text="translate English to German: The house is small." --text_b="Das Haus ist klein."

Rows are query tokens, columns the tokens they attend to; each row sums to 1. `--head=-1`
averages the heads of the layer. Every family draws its encoder's self-attention (XLNet: the
content stream; ModernBERT: global or sliding-window layers, as the layer is, named in the
title). An encoder-decoder (T5) also draws `--attention=cross` (the decoder over the encoder's
tokens) and `--attention=decoder` (the decoder's causal self-attention); for those `--text_b` is
the target text the decoder reads (after its start token, as in training) and `--layer` counts
the decoder's layers.
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
flags.DEFINE_string(
    "text_b",
    None,
    "Optional second segment; for an encoder-decoder's --attention=cross|decoder, the target text "
    "the decoder reads (required there, refused with --attention=encoder).",
)
flags.DEFINE_enum(
    "attention",
    "encoder",
    ["encoder", "cross", "decoder"],
    "Which attention: encoder (self-attention over the text; every family), cross (an "
    "encoder-decoder's decoder attending over the encoder: rows --text_b, columns --text) or "
    "decoder (its causal self-attention over --text_b).",
)
flags.DEFINE_integer("layer", -1, "Transformer layer, 0-based; negative counts from the top.")
flags.DEFINE_integer("head", 0, "Attention head, 0-based; -1 averages all heads.")
flags.DEFINE_string("output_file", "attention.png", "Where to write the PNG.")


def main(argv: list[str]) -> None:
    del argv
    for name in ("init_checkpoint", "text"):
        if not getattr(FLAGS, name):
            raise BertJaxError(f"--{name} is required")
    from bert_jax.features import plot_attention
    from bert_jax.runs.features import attention_map

    lower = FLAGS.do_lower_case if FLAGS["do_lower_case"].present else None
    m = attention_map(
        FLAGS.init_checkpoint, FLAGS.text, FLAGS.text_b, FLAGS.layer, FLAGS.head, lower,
        FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.attention,
    )  # fmt: skip
    title = f"layer {m.layer}, {m.label}"
    plot_attention(m.query_tokens, m.probs_QxK, FLAGS.output_file, title, m.key_tokens)
    size = f"{len(m.query_tokens)} x {len(m.key_tokens)} tokens"
    print(f"wrote {FLAGS.output_file} ({size}, {title})")
