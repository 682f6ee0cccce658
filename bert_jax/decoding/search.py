"""Greedy search, beam search and sampling over a step function with a fixed-size cache, as
`jax.lax.while_loop`s (jit-able, static shapes).

A model is seen through two callables:
    step(cache, ids_Bx1) -> (logits_BxV float32, cache)     one decoding step
    reorder(cache, rows_B) -> cache                         take cache rows (beam search)
Every function returns `tokens_BxM` (M = max_new_tokens; the decoder start token is not
included; rows that finished are padded with `pad_id` after their EOS).

Beam search follows transformers' (v5) vectorised `_beam_search`: 2*num_beams candidates per
step, candidates ending in EOS among the top num_beams enter the finished set with score
sum_logprobs / generated_length**length_penalty, the early-stopping heuristic and the
`early_stopping` values (True, False, "never") mean what they mean there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

StepFn = Callable[[Any, jax.Array], tuple[jax.Array, Any]]
ReorderFn = Callable[[Any, jax.Array], Any]
BIG_NEG = -1.0e9


@dataclasses.dataclass(frozen=True)
class Sampling:
    temperature: float = 1.0
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1.0: off

    def warp(self, logits_BxV: jax.Array) -> jax.Array:
        """transformers' order: temperature, then top-k, then top-p (nucleus; the most likely
        token always stays)."""
        x = logits_BxV / self.temperature if self.temperature != 1.0 else logits_BxV
        if self.top_k > 0:
            k = min(self.top_k, x.shape[-1])
            kth_B1 = jax.lax.top_k(x, k)[0][:, -1:]
            x = jnp.where(x < kth_B1, -jnp.inf, x)
        if self.top_p < 1.0:
            order = jnp.argsort(-x, axis=-1)
            sorted_x = jnp.take_along_axis(x, order, axis=-1)
            cum = jnp.cumsum(jax.nn.softmax(sorted_x, axis=-1), axis=-1)
            # Drop a token when the tokens before it already hold top_p of the mass.
            drop_sorted = (cum - jax.nn.softmax(sorted_x, axis=-1)) >= self.top_p
            drop_sorted = drop_sorted.at[:, 0].set(False)
            drop = jnp.zeros_like(drop_sorted).at[
                jnp.arange(x.shape[0])[:, None], order
            ].set(drop_sorted)
            x = jnp.where(drop, -jnp.inf, x)
        return x


def greedy_or_sample(
    step: StepFn,
    cache: Any,
    batch: int,
    max_new_tokens: int,
    start_id: int,
    eos_id: int,
    pad_id: int,
    sampling: Sampling | None = None,
    rng: jax.Array | None = None,
) -> jax.Array:
    """Argmax (or a sample from the warped distribution) at each step until every row has
    emitted EOS or max_new_tokens are out; finished rows emit `pad_id` as transformers does."""

    def cond(state):
        t, _, _, _, done_B = state
        return (t < max_new_tokens) & ~jnp.all(done_B)

    def body(state):
        t, cache, last_B, out_BxM, done_B = state
        logits_BxV, cache = step(cache, last_B[:, None])
        if sampling is None:
            next_B = jnp.argmax(logits_BxV, axis=-1).astype(jnp.int32)
        else:
            key = jax.random.fold_in(rng, t)
            next_B = jax.random.categorical(key, sampling.warp(logits_BxV), axis=-1)
            next_B = next_B.astype(jnp.int32)
        next_B = jnp.where(done_B, pad_id, next_B)
        out_BxM = out_BxM.at[:, t].set(next_B)
        return t + 1, cache, next_B, out_BxM, done_B | (next_B == eos_id)

    state = (
        jnp.int32(0),
        cache,
        jnp.full((batch,), start_id, jnp.int32),
        jnp.full((batch, max_new_tokens), pad_id, jnp.int32),
        jnp.zeros((batch,), bool),
    )
    return jax.lax.while_loop(cond, body, state)[3]


def beam_search(
    step: StepFn,
    reorder: ReorderFn,
    cache: Any,
    batch: int,
    num_beams: int,
    max_new_tokens: int,
    start_id: int,
    eos_id: int,
    pad_id: int,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
) -> tuple[jax.Array, jax.Array]:
    """(best finished sequence per row BxM, its score B). `cache` holds batch*num_beams rows
    (row r*num_beams + j is beam j of input r)."""
    b, nb, m = batch, num_beams, max_new_tokens
    keep = 2 * nb  # one EOS id: 2 * num_beams candidates always leave num_beams running
    is_top_nb = jnp.arange(keep) < nb
    flat = lambda x: x.reshape((b * nb,) + x.shape[2:])

    def gather(x, idx_BxK):  # x: B x beams x ..., idx: B x K -> B x K x ...
        return jnp.take_along_axis(x, idx_BxK.reshape(idx_BxK.shape + (1,) * (x.ndim - 2)), 1)

    def body(s):
        t = s["t"]
        last_BN = jnp.where(t == 0, start_id, flat(s["run_seq"])[:, jnp.maximum(t - 1, 0)])
        logits_BNxV, cache = step(s["cache"], last_BN[:, None].astype(jnp.int32))
        v = logits_BNxV.shape[-1]
        logp_BxNxV = jax.nn.log_softmax(logits_BNxV, axis=-1).reshape(b, nb, v)
        logp_BxNV = (logp_BxNxV + s["run_score"][:, :, None]).reshape(b, nb * v)
        top_lp_BxK, top_idx_BxK = jax.lax.top_k(logp_BxNV, keep)
        src_BxK = top_idx_BxK // v
        tok_BxK = (top_idx_BxK % v).astype(jnp.int32)
        top_seq_BxKxM = gather(s["run_seq"], src_BxK).at[:, :, t].set(tok_BxK)
        # A candidate stops on EOS, or at the last step (transformers' max-length criterion).
        hits_BxK = (tok_BxK == eos_id) | (t + 1 >= m)

        # Running beams for the next step: the best candidates that did not stop.
        run_lp_BxK = top_lp_BxK + hits_BxK.astype(jnp.float32) * BIG_NEG
        next_BxN = jax.lax.top_k(run_lp_BxK, nb)[1]
        run_seq = gather(top_seq_BxKxM, next_BxN)
        run_score = gather(run_lp_BxK, next_BxN)
        run_src_BxN = gather(src_BxK, next_BxN)

        # Finished set: merge the candidates that stopped among the top num_beams.
        just_done_BxK = hits_BxK & is_top_nb[None, :]
        fin_lp_BxK = top_lp_BxK / ((t + 1.0) ** length_penalty)
        if early_stopping is True:
            full_B1 = jnp.all(s["fin"], axis=-1, keepdims=True)
            fin_lp_BxK = fin_lp_BxK + full_B1.astype(jnp.float32) * BIG_NEG
        fin_lp_BxK = fin_lp_BxK + (~s["improvable"]).astype(jnp.float32) * BIG_NEG
        fin_lp_BxK = fin_lp_BxK + (~just_done_BxK).astype(jnp.float32) * BIG_NEG
        merged_seq = jnp.concatenate([s["seq"], top_seq_BxKxM], axis=1)
        merged_score = jnp.concatenate([s["score"], fin_lp_BxK], axis=1)
        merged_fin = jnp.concatenate([s["fin"], just_done_BxK], axis=1)
        best_BxN = jax.lax.top_k(merged_score, nb)[1]
        seq, score, fin = (gather(x, best_BxN) for x in (merged_seq, merged_score, merged_fin))

        rows_BN = (run_src_BxN + jnp.arange(b)[:, None] * nb).reshape(-1)
        cache = reorder(cache, rows_BN)

        # Can a running beam still beat the worst finished one? (transformers' heuristic)
        t1 = t + 1
        if early_stopping == "never" and length_penalty > 0.0:
            best_len = jnp.float32(m)
        else:
            best_len = t1.astype(jnp.float32)
        best_run_B1 = run_score[:, :1] / best_len**length_penalty
        worst_BxN = jnp.where(fin, jnp.min(score, axis=1, keepdims=True), BIG_NEG)
        improvable = s["improvable"] & jnp.any(best_run_B1 > worst_BxN, axis=-1, keepdims=True)
        go = jnp.any(improvable) & ~jnp.all(hits_BxK)
        if early_stopping is True:
            go = go & ~jnp.all(fin)
        return dict(t=t1, cache=cache, run_seq=run_seq, run_score=run_score, seq=seq,
                    score=score, fin=fin, improvable=improvable, go=go)  # fmt: skip

    init = dict(
        t=jnp.int32(0),
        cache=cache,
        run_seq=jnp.full((b, nb, m), pad_id, jnp.int32),
        run_score=jnp.tile(jnp.where(jnp.arange(nb) == 0, 0.0, BIG_NEG)[None], (b, 1)),
        seq=jnp.full((b, nb, m), pad_id, jnp.int32),
        score=jnp.full((b, nb), BIG_NEG, jnp.float32),
        fin=jnp.zeros((b, nb), bool),
        improvable=jnp.ones((b, 1), bool),
        go=jnp.bool_(m > 0),
    )
    final = jax.lax.while_loop(lambda s: s["go"], body, init)
    return final["seq"][:, 0], final["score"][:, 0]
