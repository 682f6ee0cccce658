"""Model + tokenizer for the inference commands, from any checkpoint `load_pretrained` reads."""

from __future__ import annotations

import os

from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.interop import load_pretrained
from bert_jax.tokenization import ByteBpeTokenizer, FullTokenizer
from bert_jax.tokenization.byte_bpe import is_byte_bpe_file


def load_encoder(
    init_checkpoint: str | os.PathLike,
    bert_config_file: str | os.PathLike | None = None,
    vocab_file: str | os.PathLike | None = None,
    do_lower_case: bool | None = None,
    dtype: str = "float32",
):
    """(config, bert params, FullTokenizer). `do_lower_case=None` takes the checkpoint's own
    setting when it records one, else True (the reference default)."""
    pre = load_pretrained(init_checkpoint, bert_config_file, vocab_file)
    if pre.vocab_file is None:
        raise BertJaxError(
            f"{init_checkpoint}: no vocab.txt (nor vocab.json + merges.txt or tokenizer.json) "
            "inside; pass --vocab_file"
        )
    config: BertConfig = pre.config.replace(dtype=dtype)
    if is_byte_bpe_file(pre.vocab_file):  # RoBERTa's byte-level BPE never lower-cases
        return config, pre.params["bert"], ByteBpeTokenizer(pre.vocab_file)
    if do_lower_case is None:
        do_lower_case = True if pre.do_lower_case is None else pre.do_lower_case
    tokenizer = FullTokenizer(pre.vocab_file, do_lower_case=do_lower_case)
    return config, pre.params["bert"], tokenizer
