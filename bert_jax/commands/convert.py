"""`bert-jax convert`: a Hugging Face dir, a Google TF checkpoint or a bert-jax workdir ->
a Hugging Face dir (config.json + model.safetensors + the tokenizer) that transformers loads. A
fine-tuning workdir exports whole: its task head as Bert{ForSequenceClassification,
ForTokenClassification, ForQuestionAnswering, ForMultipleChoice} with id2label/label2id, and the
tokenizer the run used (vocab.txt + tokenizer_config.json), so Auto classes and pipelines load it.
An XLNet directory or fine-tuned workdir exports as XLNetLMHeadModel / XLNetModel /
XLNetFor{SequenceClassification, TokenClassification, QuestionAnsweringSimple}; a T5 directory or
seq2seq workdir (pretrained or text-to-text fine-tuned) as T5ForConditionalGeneration.

  bert-jax convert --init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt --output_dir=hf/

An --output_dir holding an earlier export of the same family (config.json's model_type) is
replaced whole: its model and tokenizer files that the new export lacks are removed. Another
family's export there is refused unless --overwrite_output_dir; a bert-jax workdir always.
"""

from __future__ import annotations

from absl import flags

from bert_jax.errors import BertJaxError

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "init_checkpoint", None, "HF dir, TF checkpoint prefix (bert_model.ckpt) or bert-jax workdir."
)
flags.DEFINE_string(
    "bert_config_file", None, "Config json; default: bert_config.json beside a TF checkpoint."
)
flags.DEFINE_string(
    "vocab_file", None, "vocab.txt to ship with the model; default: the one inside."
)
flags.DEFINE_string("output_dir", None, "Where to write the Hugging Face directory.")
flags.DEFINE_bool(
    "overwrite_output_dir",
    False,
    "Replace the model files of another family's export in --output_dir (an export of the same "
    "family is always replaced whole).",
)


def main(argv: list[str]) -> None:
    del argv
    for name in ("init_checkpoint", "output_dir"):
        if not getattr(FLAGS, name):
            raise BertJaxError(f"--{name} is required")
    from bert_jax.atomic_write import check_writable_dir
    from bert_jax.runs.export import convert_any

    check_writable_dir(FLAGS.output_dir, "--output_dir", leave_no_trace=True)
    for line in convert_any(
        FLAGS.init_checkpoint,
        FLAGS.output_dir,
        FLAGS.bert_config_file,
        FLAGS.vocab_file,
        FLAGS.overwrite_output_dir,
    ):
        print(line)
