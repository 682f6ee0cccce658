"""Decoding from the left-to-right LM of the ablations ("LTR & No NSP": a BERT with causal
attention whose MLM head predicts the next token): the prompt is `[CLS] pieces`, generation
stops at [SEP] (the end of a segment in its training data) or after `max_new_tokens`.

The search functions of `bert_jax.decoding.search` see the model through a step function whose
cache is the whole token buffer (prompt + generated, fixed length) and each row's length; every
step re-runs the encoder over the buffer (no key/value cache: the models are small and the
buffer short) and reads the logits at the row's last token.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.arch.bert.heads import BertForPreTraining
from bert_jax.arch.seq2seq.decoding import GenerateSettings, trim
from bert_jax.config import BertConfig
from bert_jax.decoding.search import Sampling, beam_search, greedy_or_sample
from bert_jax.errors import BertJaxError


class CausalLMGenerator:
    def __init__(self, config: BertConfig, settings: GenerateSettings, eos_id: int,
                 pad_id: int = 0) -> None:  # fmt: skip
        if not config.causal:
            raise BertJaxError("generate: the BERT checkpoint is not a left-to-right LM "
                               "(config causal=False; pretrain with objective=ltr)")  # fmt: skip
        if settings.max_new_tokens + 1 > config.max_position_embeddings:  # (+1: the [CLS])
            raise BertJaxError(
                f"--max_new_tokens={settings.max_new_tokens}: the model has "
                f"{config.max_position_embeddings} positions (max_position_embeddings), one for "
                f"the prompt's [CLS] at least; use --max_new_tokens="
                f"{config.max_position_embeddings - 1} or less"
            )
        self.config, self.settings = config, settings
        self.eos_id, self.pad_id = eos_id, pad_id
        self.model = BertForPreTraining(config, use_nsp=False)
        self._fn = jax.jit(self._generate)

    def __call__(self, params: Any, prompts: list[list[int]], seed: int = 0) -> np.ndarray:
        """Generated ids [B, max_new_tokens] (padded with pad_id after EOS) for each prompt."""
        length = max(len(p) for p in prompts) + self.settings.max_new_tokens
        if length > self.config.max_position_embeddings:
            raise BertJaxError(
                f"prompt + --max_new_tokens = {length} tokens exceed the model's "
                f"max_position_embeddings {self.config.max_position_embeddings}"
            )
        buf_BxL = np.full((len(prompts), length), self.pad_id, np.int32)
        for i, p in enumerate(prompts):
            buf_BxL[i, : len(p)] = p
        lengths_B = np.asarray([len(p) for p in prompts], np.int32)
        return np.asarray(self._fn(params, buf_BxL, lengths_B, jax.random.PRNGKey(seed)))

    def _generate(self, params, buf_BxL, lengths_B, rng):
        s, b = self.settings, buf_BxL.shape[0]
        n = s.num_beams
        if n > 1:
            buf_BxL, lengths_B = jnp.repeat(buf_BxL, n, 0), jnp.repeat(lengths_B, n, 0)
        positions_1xL = jnp.arange(buf_BxL.shape[1])[None]

        def step(cache, ids_Bx1):
            buf, length, started = cache
            rows = jnp.arange(buf.shape[0])
            # The first step's input is the search's start token: the prompt is already there.
            written = buf.at[rows, jnp.minimum(length, buf.shape[1] - 1)].set(ids_Bx1[:, 0])
            buf = jnp.where(started, written, buf)
            length = length + started.astype(length.dtype)
            mask = (positions_1xL < length[:, None]).astype(jnp.int32)
            out = self.model.apply({"params": params}, buf, mask, jnp.zeros_like(buf))
            logits_BxV = out.mlm_logits[rows, length - 1].astype(jnp.float32)
            return logits_BxV, (buf, length, jnp.bool_(True))

        def reorder(cache, rows_B):
            buf, length, started = cache
            return jnp.take(buf, rows_B, 0), jnp.take(length, rows_B, 0), started

        cache = (buf_BxL, lengths_B, jnp.bool_(False))
        ids = dict(start_id=self.eos_id, eos_id=self.eos_id, pad_id=self.pad_id)
        if n > 1:
            tokens, _ = beam_search(step, reorder, cache, b, n, s.max_new_tokens,
                                    length_penalty=s.length_penalty,
                                    early_stopping=s.early_stopping, **ids)  # fmt: skip
            return tokens
        sampling = Sampling(s.temperature, s.top_k, s.top_p) if s.do_sample else None
        return greedy_or_sample(step, cache, b, s.max_new_tokens, sampling=sampling, rng=rng,
                                **ids)  # fmt: skip


def generate_causal_lines(pretrained: Any, tokenizer: Any, lines: list[str],
                          settings: GenerateSettings, batch_size: int, max_input_length: int,
                          seed: int = 0) -> Iterator[dict]:  # fmt: skip
    """`bert-jax generate` for a causal BERT: each line's continuation, WordPiece-joined."""
    vocab = tokenizer.vocab
    for special in ("[CLS]", "[SEP]"):
        if special not in vocab:
            raise BertJaxError(f"{tokenizer.vocab_file}: no {special} token")
    eos = vocab["[SEP]"]
    gen = CausalLMGenerator(pretrained.config, settings, eos_id=eos, pad_id=0)
    for start in range(0, len(lines), batch_size):
        chunk = lines[start : start + batch_size]
        prompts = [[vocab["[CLS]"], *tokenizer.encode_batch([line])[0]][:max_input_length]
                   for line in chunk]  # fmt: skip
        out_BxM = gen(pretrained.params, prompts, seed=seed + start)
        for line, tokens in zip(chunk, out_BxM, strict=True):
            ids = trim(tokens, eos)
            words = tokenizer.convert_ids_to_tokens([i for i in ids if i != eos])
            text = " ".join(words).replace(" ##", "")
            yield {"input": line, "output": text, "output_ids": ids}
