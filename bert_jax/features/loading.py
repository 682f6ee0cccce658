"""Model + tokenizer for the inference commands, from any checkpoint `load_pretrained` reads."""

from __future__ import annotations

import os

from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.tokenization.directory import LOOKED_FOR, check_vocab_fits, open_tokenizer


def load_encoder(
    init_checkpoint: str | os.PathLike,
    bert_config_file: str | os.PathLike | None = None,
    vocab_file: str | os.PathLike | None = None,
    do_lower_case: bool | None = None,
    dtype: str = "float32",
):
    """(config, bert params, tokenizer). `do_lower_case=None` takes the checkpoint's own
    setting when it records one, else True (the reference default); a tokenizer.json or a
    byte-level BPE keeps its own, and a flag that contradicts it is refused."""
    pre = load_pretrained(init_checkpoint, bert_config_file, vocab_file)
    if pre.vocab_file is None:
        raise BertJaxError(
            f"{init_checkpoint}: no tokenizer inside ({LOOKED_FOR}); pass --vocab_file"
        )
    config: BertConfig = pre.config.replace(dtype=dtype)
    tokenizer = open_tokenizer(pre.vocab_file, do_lower_case, "--do_lower_case", pre.do_lower_case)
    check_vocab_fits(tokenizer, config.vocab_size, init_checkpoint)
    return config, pre.params["bert"], tokenizer
