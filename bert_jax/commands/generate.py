"""`bert-jax generate`: decode from an encoder-decoder (T5 or the Transformer) or from the
left-to-right LM of the ablations (a causal BERT), one JSON line per input line: {"input": text,
"output": text, "output_ids": [ids]} (`output_ids` without the decoder start token, up to and
including EOS; for the causal BERT the continuation of `[CLS] line`, up to and including [SEP]).

  bert-jax generate --init_checkpoint=t5_dir --input_file=in.txt --output_file=out.jsonl \\
      [--num_beams=4 --length_penalty=1.0 --max_new_tokens=32] \\
      [--do_sample --temperature=0.7 --top_k=50 --top_p=0.9 --seed=0]

`--init_checkpoint` is a Hugging Face T5 directory (config.json, model.safetensors, spiece.model),
a bert-jax seq2seq workdir, or a causal BERT (a `--config.objective=ltr` workdir, or a Hugging
Face BertLMHeadModel directory with vocab.txt). Greedy by default; beam search with
--num_beams > 1 (length penalty and early stopping as transformers defines them); sampling with
--do_sample.
"""

from __future__ import annotations

import json

from absl import flags

from bert_jax.errors import BertJaxError

FLAGS = flags.FLAGS
flags.DEFINE_string("init_checkpoint", None, "T5 dir, seq2seq workdir or causal BERT.")
flags.DEFINE_string("input_file", None, "Text, one input per line.")
flags.DEFINE_string("output_file", None, "JSON lines, one object per input line.")
flags.DEFINE_string("spm_model", None, "T5 sentencepiece model (default: the checkpoint's).")
flags.DEFINE_integer("max_new_tokens", 32, "Generated tokens at most (EOS included).")
flags.DEFINE_integer("num_beams", 1, "Beam width; 1 = greedy (or sampling).")
flags.DEFINE_float("length_penalty", 1.0, "Beam score = sum logprobs / length**length_penalty.")
flags.DEFINE_enum("early_stopping", "false", ["false", "true", "never"],
                  "Beam search stopping rule (transformers' early_stopping).")  # fmt: skip
flags.DEFINE_bool("do_sample", False, "Sample instead of greedy.")
flags.DEFINE_float("temperature", 1.0, "Sampling temperature.")
flags.DEFINE_integer("top_k", 0, "Sample from the k most likely tokens (0 = all).")
flags.DEFINE_float("top_p", 1.0, "Nucleus sampling mass (1.0 = off).")
flags.DEFINE_integer("seed", 0, "Sampling seed (batch i uses seed + i).")
flags.DEFINE_integer("batch_size", 8, "Inputs decoded together.")
flags.DEFINE_integer("max_input_length", 512, "Input tokens kept (EOS included).")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise BertJaxError(f"unexpected arguments: {' '.join(argv[1:])}")
    for name in ("init_checkpoint", "input_file", "output_file"):
        if not getattr(FLAGS, name):
            raise BertJaxError(f"--{name} is required")
    from etils import epath

    from bert_jax.arch import registry
    from bert_jax.arch.seq2seq.decoding import GenerateSettings
    from bert_jax.atomic_write import open_atomic

    # Every flag before anything is read or written: a --batch_size of -1 once decoded nothing
    # and replaced a finished output file with an empty one.
    for flag in ("batch_size", "max_input_length"):
        if getattr(FLAGS, flag) < 1:
            raise BertJaxError(f"--{flag}={getattr(FLAGS, flag)}: must be >= 1")
    settings = GenerateSettings(
        max_new_tokens=FLAGS.max_new_tokens, num_beams=FLAGS.num_beams,
        length_penalty=FLAGS.length_penalty,
        early_stopping={"false": False, "true": True, "never": "never"}[FLAGS.early_stopping],
        do_sample=FLAGS.do_sample, temperature=FLAGS.temperature, top_k=FLAGS.top_k,
        top_p=FLAGS.top_p,
    )  # fmt: skip
    if epath.Path(FLAGS.output_file).is_dir():
        raise BertJaxError(f"--output_file={FLAGS.output_file}: is a directory; name a file")
    lines = _read_lines(FLAGS.input_file)
    # The output is staged under a hidden name and renamed over --output_file only when every
    # line is decoded: a run that fails (the model, memory, a kill) leaves an earlier file whole.
    with open_atomic(FLAGS.output_file) as f:
        family = registry.for_checkpoint(FLAGS.init_checkpoint)
        if family is not None and family.generates == "causal":  # a left-to-right BERT
            rows = _causal_rows(lines, settings)
        else:  # an encoder-decoder (its loader names what it found otherwise)
            rows = _seq2seq_rows(lines, settings)
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"bert-jax generate: {len(lines)} lines -> {FLAGS.output_file}")


def _read_lines(path: str) -> list[str]:
    """The input's lines; a file that is not UTF-8 names its first bad line (a decode error
    traceback before), and an empty one is refused (it would write an empty output)."""
    from bert_jax.tasks.text_files import read_utf8

    text = read_utf8(path, f"--input_file={path}")
    lines = text.splitlines()
    if not lines:
        raise BertJaxError(f"--input_file={path}: empty; give one input per line")
    return lines


def _causal_rows(lines: list[str], settings):
    from bert_jax.arch.bert.causal_lm import generate_causal_lines
    from bert_jax.arch.bert.pretrained import load_pretrained
    from bert_jax.tokenization.directory import check_vocab_fits, open_tokenizer

    pretrained = load_pretrained(FLAGS.init_checkpoint)
    if not pretrained.vocab_file:
        raise BertJaxError(f"{FLAGS.init_checkpoint}: no vocab.txt next to the causal BERT")
    # vocab.txt, or the tokenizer.json transformers v5 saves alone
    tokenizer = open_tokenizer(pretrained.vocab_file, None, default_lower=pretrained.do_lower_case)
    check_vocab_fits(tokenizer, pretrained.config.vocab_size, FLAGS.init_checkpoint)
    return generate_causal_lines(pretrained, tokenizer, lines, settings, FLAGS.batch_size,
                                 FLAGS.max_input_length, FLAGS.seed)  # fmt: skip


def _seq2seq_rows(lines: list[str], settings):
    from bert_jax.arch.seq2seq.decoding import check_max_new_tokens
    from bert_jax.arch.seq2seq.generate_text import generate_lines
    from bert_jax.arch.seq2seq.load import load_seq2seq
    from bert_jax.tokenization.t5_vocab import T5Vocab

    pretrained = load_seq2seq(FLAGS.init_checkpoint)
    spm = FLAGS.spm_model or pretrained.spm_model
    if spm is None:
        raise BertJaxError(
            f"{FLAGS.init_checkpoint}: no spiece.model or tokenizer.json; give --spm_model"
        )
    vocab = T5Vocab.for_model(spm, pretrained.config.vocab_size)
    check_max_new_tokens(pretrained.config, settings, FLAGS.batch_size)
    return generate_lines(pretrained, vocab, lines, settings, FLAGS.batch_size,
                          FLAGS.max_input_length, FLAGS.seed)  # fmt: skip
