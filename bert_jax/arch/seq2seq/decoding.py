"""Generation from the encoder-decoder: encode once, create the fixed-size cache (cross-attention
keys/values projected once), then greedy, beam or sampled decoding (`bert_jax.decoding.search`),
all inside one jitted function per (batch, lengths, settings).

    gen = Seq2SeqGenerator(model, GenerateSettings(num_beams=4, max_new_tokens=32))
    tokens_BxM = gen(params, input_ids_BxS, input_mask_BxS, seed=0)
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp

from bert_jax.arch.seq2seq import EncoderDecoder, Seq2SeqConfig
from bert_jax.arch.seq2seq.rnn import RnnEncoderDecoder
from bert_jax.decoding.search import Sampling, beam_search, greedy_or_sample
from bert_jax.errors import BertJaxError

# Cache leaves without a batch axis (the decoder's step counter and slot positions).
_UNBATCHED = ("index", "key_positions")


@dataclasses.dataclass(frozen=True)
class GenerateSettings:
    max_new_tokens: int = 32
    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise BertJaxError(f"--max_new_tokens {self.max_new_tokens}: must be >= 1")
        if self.num_beams < 1:
            raise BertJaxError(f"--num_beams {self.num_beams}: must be >= 1")
        if self.do_sample and self.num_beams > 1:
            raise BertJaxError("--do_sample with --num_beams > 1 (beam sampling) is not supported")
        if self.temperature <= 0:
            raise BertJaxError(f"--temperature {self.temperature}: must be > 0")
        if not 0 < self.top_p <= 1:
            raise BertJaxError(f"--top_p {self.top_p}: must be in (0, 1]")
        if self.top_k < 0:
            raise BertJaxError(f"--top_k {self.top_k}: must be >= 0")
        if self.early_stopping not in (True, False, "never"):
            raise BertJaxError(f"early_stopping {self.early_stopping!r}: True, False or 'never'")


def memory_bytes() -> int:
    """The first device's memory (an accelerator's limit; on CPU the host's physical memory)."""
    stats = jax.devices()[0].memory_stats() or {}
    if "bytes_limit" in stats:
        return int(stats["bytes_limit"])
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def bytes_per_new_token(config: Seq2SeqConfig, rows: int) -> int:
    """What decoding holds per generated position, beyond the model: every decoder layer's
    cached keys and values for each of `rows` (batch x beams), and each row's token and score."""
    itemsize = 2 if config.dtype == "bfloat16" else 4
    return rows * (config.num_decoder_layers * 2 * config.inner_dim * itemsize + 8)


def check_max_new_tokens(
    config: Seq2SeqConfig, settings: GenerateSettings, batch_size: int, memory: int | None = None
) -> None:
    """Refuse, before anything is compiled, a --max_new_tokens whose decoding cache alone would
    take more than half the device's memory (it was an out-of-memory error after 35 s)."""
    rows = batch_size * settings.num_beams
    per_token = bytes_per_new_token(config, rows)
    memory = memory_bytes() if memory is None else memory
    most = memory // 2 // per_token
    if settings.max_new_tokens > most:
        need = per_token * settings.max_new_tokens / 2**30
        fix = (f"use --max_new_tokens={most} or less, or fewer rows" if most >= 1
               else "use fewer rows")  # fmt: skip
        raise BertJaxError(
            f"--max_new_tokens={settings.max_new_tokens}: the decoding cache of {rows} rows "
            f"(--batch_size x --num_beams) would take {need:,.1f} GiB, more than half of this "
            f"device's {memory / 2**30:.1f} GiB; {fix}"
        )


def reorder_cache(cache: Any, rows_B: jax.Array) -> Any:
    """Take batch rows of every cached tensor (a scanned stack has the layer axis first)."""

    def take(path, x):
        names = [getattr(k, "key", None) for k in path]
        if names[-1] in _UNBATCHED:
            return x
        return jnp.take(x, rows_B, axis=1 if "layers" in names else 0)

    return jax.tree_util.tree_map_with_path(take, cache)


class Seq2SeqGenerator:
    def __init__(self, model: EncoderDecoder, settings: GenerateSettings) -> None:
        self.model = model
        self.settings = settings
        self._fn = jax.jit(self._generate)

    def __call__(self, params: Any, ids_BxS, mask_BxS, seed: int = 0) -> jax.Array:
        return self._fn(params, jnp.asarray(ids_BxS, jnp.int32), jnp.asarray(mask_BxS, jnp.int32),
                        jax.random.PRNGKey(seed))  # fmt: skip

    def _generate(self, params, ids_BxS, mask_BxS, rng):
        model = self.model
        b, n, m = ids_BxS.shape[0], self.settings.num_beams, self.settings.max_new_tokens
        if isinstance(model, RnnEncoderDecoder):
            step, state, reorder = _rnn_steps(model, params, ids_BxS, mask_BxS, n)
            return self._search(step, state, reorder, b, rng)
        enc_BxSxD = model.apply({"params": params}, ids_BxS, mask_BxS, method=EncoderDecoder.encode)
        if n > 1:
            enc_BxSxD = jnp.repeat(enc_BxSxD, n, axis=0)
            mask_BxS = jnp.repeat(mask_BxS, n, axis=0)
        _, created = model.apply(
            {"params": params}, jnp.zeros((b * n, m), jnp.int32), enc_BxSxD, mask_BxS,
            decode=True, method=EncoderDecoder.decode, mutable=["cache"],
        )  # fmt: skip

        def step(state, ids_Bx1):
            cache, mask = state
            (logits_Bx1xV, _), new = model.apply(
                {"params": params, "cache": cache}, ids_Bx1, None, mask,
                decode=True, method=EncoderDecoder.decode, mutable=["cache"],
            )  # fmt: skip
            return logits_Bx1xV[:, 0], (new["cache"], mask)

        state = (created["cache"], mask_BxS)
        return self._search(step, state, _reorder_state, b, rng)

    def _search(self, step, state, reorder, b: int, rng):
        s, cfg = self.settings, self.model.config
        n, m = s.num_beams, s.max_new_tokens
        ids = dict(start_id=cfg.decoder_start_token_id, eos_id=cfg.eos_token_id,
                   pad_id=cfg.pad_token_id)  # fmt: skip
        if n > 1:
            tokens_BxM, _ = beam_search(
                step, reorder, state, b, n, m, length_penalty=s.length_penalty,
                early_stopping=s.early_stopping, **ids,
            )  # fmt: skip
            return tokens_BxM
        sampling = Sampling(s.temperature, s.top_k, s.top_p) if s.do_sample else None
        return greedy_or_sample(step, state, b, m, sampling=sampling, rng=rng, **ids)


def _rnn_steps(model: RnnEncoderDecoder, params, ids_BxS, mask_BxS, beams: int):
    """The LSTM baseline's step function: its cache is (LSTM carry, encoder states, mask)."""
    carry, enc = model.apply({"params": params}, ids_BxS, mask_BxS,
                             method=RnnEncoderDecoder.encode)  # fmt: skip
    cache = jax.tree.map(lambda x: jnp.repeat(x, beams, axis=0), (carry, enc, mask_BxS))

    def step(cache, ids_Bx1):
        logits, cache = model.apply({"params": params}, cache, ids_Bx1,
                                    method=RnnEncoderDecoder.decode_step)  # fmt: skip
        return logits[:, 0], cache

    def reorder(cache, rows_B):
        return jax.tree.map(lambda x: jnp.take(x, rows_B, axis=0), cache)

    return step, cache, reorder


def _reorder_state(state, rows_B):
    cache, mask = state
    return reorder_cache(cache, rows_B), jnp.take(mask, rows_B, axis=0)


def trim(tokens_M, eos_id: int) -> list[int]:
    """Generated ids up to and including the first EOS (all of them if none)."""
    out = []
    for t in tokens_M.tolist():
        out.append(int(t))
        if t == eos_id:
            break
    return out
