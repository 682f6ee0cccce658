"""The one masked-LM masker: static masks in the data pipeline and dynamic masks in the input
pipeline are this function, vectorised over a batch of padded sequences.

The rule is the reference's create_masked_lm_predictions: predict
min(max_predictions, max(1, round(num_tokens * masked_lm_prob))) positions (num_tokens counts
[CLS]/[SEP]; Python 3 rounding, half to even), never a special token, chosen uniformly (whole
words with `whole_word`: a word is taken only if all its pieces fit the budget, in a random word
order); each chosen token becomes [MASK], a random id or stays, by the TokenMasking split.

Randomness is a counter-based hash (splitmix64) of (seed, example index, position, stream), so a
row's mask depends only on the seed and its index: never on batch boundaries, prefetching,
worker count or how often an iterator was restored. The reference-compatible data mode keeps its
own masker (`bert_jax.data.instances.mask_reference`) because it must replay Python's `random`
draws in the reference's order.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from etils import epath

from bert_jax.errors import BertJaxError
from bert_jax.objectives.base import TokenMasking

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_STREAM_ORDER, _STREAM_ACTION, _STREAM_RANDOM_ID, _STREAM_NGRAM = 1, 2, 3, 4


@dataclasses.dataclass(frozen=True)
class MaskingSpec:
    """The vocabulary facts masking needs, plus the corruption split and whole-word switch."""

    mask_id: int
    vocab_size: int  # random replacements are drawn uniformly from [0, vocab_size)
    special_ids: tuple[int, ...]  # never masked ([CLS], [SEP], [PAD])
    masked_lm_prob: float = 0.15
    mask_prob: float = 0.8
    random_prob: float = 0.1
    # Ids of "##" word pieces (whole-word masking groups a word's pieces); empty = not used.
    continuation_ids: tuple[int, ...] = dataclasses.field(default=(), repr=False)
    whole_word: bool = False
    max_ngram: int = 1  # > 1: spans of n <= max_ngram tokens, P(n) proportional to 1/n (ALBERT)

    def __post_init__(self) -> None:
        for name in ("masked_lm_prob", "mask_prob", "random_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise BertJaxError(f"masking {name}={getattr(self, name)}: must be in [0, 1]")
        if self.mask_prob + self.random_prob > 1.0 + 1e-9:
            raise BertJaxError(
                f"masking mask_prob + random_prob = {self.mask_prob + self.random_prob} > 1"
            )
        if self.whole_word and not self.continuation_ids:
            raise BertJaxError("whole-word masking needs the vocab's '##' continuation ids")
        if self.max_ngram < 1:
            raise BertJaxError(f"masking max_ngram={self.max_ngram}: must be >= 1")
        if self.max_ngram > 1 and self.whole_word:
            raise BertJaxError("masking: n-gram and whole-word masking are exclusive")

    @classmethod
    def from_tokens(
        cls,
        tokens: list[str],
        rule: TokenMasking | None = None,
        whole_word: bool = False,
        source: str = "vocab",
    ) -> MaskingSpec:
        """`tokens[i]` is the token of id i (a vocab.txt, or a SentencePiece .vocab's first
        column)."""
        ids = {token: i for i, token in enumerate(tokens)}

        def find(*names: str) -> int:
            for name in names:
                if name in ids:
                    return ids[name]
            raise BertJaxError(f"{source}: no {' or '.join(names)} token in the vocabulary")

        rule = rule or TokenMasking()
        return cls(
            mask_id=find("[MASK]", "<mask>"),  # BERT's names, or RoBERTa's
            vocab_size=len(tokens),
            special_ids=(find("[CLS]", "<s>"), find("[SEP]", "</s>"), find("[PAD]", "<pad>")),
            masked_lm_prob=rule.masked_lm_prob,
            mask_prob=rule.mask_prob,
            random_prob=rule.random_prob,
            continuation_ids=tuple(i for i, t in enumerate(tokens) if t.startswith("##")),
            whole_word=whole_word,
            max_ngram=rule.max_ngram,
        )

    @classmethod
    def from_vocab_file(
        cls,
        vocab_file: str,
        masked_lm_prob: float = 0.15,
        whole_word: bool = False,
        rule: TokenMasking | None = None,
    ) -> MaskingSpec:
        """WordPiece vocab.txt (one token a line), SentencePiece .vocab (token<TAB>score) or a
        byte-level BPE vocab.json / tokenizer.json (RoBERTa); `rule` gives the [MASK]/random/keep
        split (its masked_lm_prob is replaced)."""
        if epath.Path(vocab_file).name.endswith(".json"):
            from bert_jax.tokenization.vocab import load_vocab

            tokens = list(load_vocab(vocab_file))  # in id order
        else:
            text = epath.Path(vocab_file).read_text(encoding="utf-8")
            tokens = [line.split("\t")[0].strip() for line in text.splitlines()]
        rule = dataclasses.replace(rule or TokenMasking(), masked_lm_prob=masked_lm_prob)
        return cls.from_tokens(tokens, rule, whole_word, source=vocab_file)

    def fingerprint(self) -> str:
        """Short identity for resume checks (the continuation ids are summarised, not listed)."""
        return f"{self!r}/wwm_ids={len(self.continuation_ids)}"


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64 arrays (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _bits(seed: int, example_index_B: np.ndarray, length: int, stream: int) -> np.ndarray:
    """A uint64 hash for every (example, position): [B, length]."""
    key = _mix(np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * _GOLDEN + np.uint64(stream))
    ex_B = _mix(key ^ (example_index_B.astype(np.uint64) * _GOLDEN))
    pos_L = np.arange(1, length + 1, dtype=np.uint64) * _GOLDEN
    return _mix(ex_B[:, None] + pos_L[None, :])


def _uniform(bits: np.ndarray) -> np.ndarray:
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _whole_word_choice(
    candidate_BxL: np.ndarray,
    starts_word_BxL: np.ndarray,
    key_BxL: np.ndarray,
    budget_B: np.ndarray,
) -> np.ndarray:
    """Chosen positions [B, L] bool: words in the order of their first piece's key, each taken
    whole if it fits the remaining budget (the reference's greedy rule); per row, since the
    skip-if-too-long rule is sequential."""
    chosen_BxL = np.zeros_like(candidate_BxL)
    for r in range(candidate_BxL.shape[0]):
        cand = np.flatnonzero(candidate_BxL[r])
        if not cand.size:
            continue
        # A word starts at every candidate that is not a "##" piece (as the reference, a
        # piece joins the previous candidate's word even across [SEP]).
        first = starts_word_BxL[r, cand]
        first[0] = True
        groups = np.split(cand, np.flatnonzero(first)[1:])
        order = np.argsort(key_BxL[r, cand[first]], kind="stable")
        taken, budget = 0, int(budget_B[r])
        for g in order:
            if taken >= budget:
                break
            if taken + len(groups[g]) <= budget:
                chosen_BxL[r, groups[g]] = True
                taken += len(groups[g])
    return chosen_BxL


def ngram_lengths(uniform: np.ndarray, max_ngram: int) -> np.ndarray:
    """n in 1..max_ngram for uniforms in [0, 1), with P(n) proportional to 1/n."""
    weights = 1.0 / np.arange(1, max_ngram + 1)
    edges = np.cumsum(weights / weights.sum())
    return np.minimum(np.searchsorted(edges, uniform, side="right"), max_ngram - 1) + 1


def _ngram_choice(
    candidate_BxL: np.ndarray,
    key_BxL: np.ndarray,
    n_BxL: np.ndarray,
    budget_B: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Chosen positions [B, L] and the span-length counts [max n]: starts in the order of their
    key, each taking the n-gram drawn for it (n_BxL) of consecutive unchosen candidates."""
    chosen_BxL = np.zeros_like(candidate_BxL)
    counts = np.zeros(int(n_BxL.max(initial=1)), np.int64)
    length = candidate_BxL.shape[1]
    for r in range(candidate_BxL.shape[0]):
        cand = np.flatnonzero(candidate_BxL[r])
        taken, budget = 0, int(budget_B[r])
        for start in cand[np.argsort(key_BxL[r, cand], kind="stable")]:
            if taken >= budget:
                break
            if chosen_BxL[r, start]:
                continue
            n = int(n_BxL[r, start])
            end = start + n
            # As ALBERT: a span that would overlap a chosen one, leave the candidates or exceed
            # the budget is skipped, not shortened (later starts fill the budget).
            if taken + n > budget or end > length:
                continue
            if not candidate_BxL[r, start:end].all() or chosen_BxL[r, start:end].any():
                continue
            chosen_BxL[r, start:end] = True
            counts[n - 1] += 1
            taken += n
    return chosen_BxL, counts


def mask_batch(
    input_ids_BxL: np.ndarray,
    input_mask_BxL: np.ndarray,
    example_index_B: np.ndarray,
    spec: MaskingSpec,
    max_predictions_per_seq: int,
    seed: int,
) -> dict[str, np.ndarray]:
    """Masks a batch. Returns `input_ids` (masked), `masked_lm_positions` / `masked_lm_ids`
    (int64 [B, P], ascending positions, zero padded), `masked_lm_weights` (float32 [B, P], 1.0 for
    real predictions) and `mask_kinds` (int64 [3]: tokens set to [MASK], to a random id, kept);
    with n-gram masking also `ngram_counts` (int64 [max_ngram]: spans of each length)."""
    batch, length = input_ids_BxL.shape
    with np.errstate(over="ignore"):
        num_tokens_B = input_mask_BxL.sum(axis=1)
        candidate_BxL = (input_mask_BxL != 0) & ~np.isin(input_ids_BxL, spec.special_ids)
        budget_B = np.maximum(1, np.rint(num_tokens_B * spec.masked_lm_prob)).astype(np.int64)
        budget_B = np.minimum(budget_B, max_predictions_per_seq)
        key_BxL = _uniform(_bits(seed, example_index_B, length, _STREAM_ORDER))
        ngram_counts = None
        if spec.whole_word:
            starts_BxL = ~np.isin(input_ids_BxL, spec.continuation_ids)
            chosen_BxL = _whole_word_choice(candidate_BxL, starts_BxL, key_BxL, budget_B)
        elif spec.max_ngram > 1:
            u_BxL = _uniform(_bits(seed, example_index_B, length, _STREAM_NGRAM))
            n_BxL = ngram_lengths(u_BxL, spec.max_ngram)
            chosen_BxL, ngram_counts = _ngram_choice(candidate_BxL, key_BxL, n_BxL, budget_B)
        else:
            # A random order of the candidates (non-candidates sort last); take the budget.
            key_BxL = np.where(candidate_BxL, key_BxL, 2.0)
            rank_BxL = np.argsort(np.argsort(key_BxL, axis=1, kind="stable"), axis=1)
            chosen_BxL = rank_BxL < np.minimum(budget_B, candidate_BxL.sum(axis=1))[:, None]
        action_BxL = _uniform(_bits(seed, example_index_B, length, _STREAM_ACTION))
        random_BxL = (
            _bits(seed, example_index_B, length, _STREAM_RANDOM_ID) % np.uint64(spec.vocab_size)
        ).astype(np.int64)

    to_mask_BxL = chosen_BxL & (action_BxL < spec.mask_prob)
    to_random_BxL = chosen_BxL & ~to_mask_BxL & (action_BxL < spec.mask_prob + spec.random_prob)
    masked_BxL = np.where(to_mask_BxL, spec.mask_id, input_ids_BxL)
    masked_BxL = np.where(to_random_BxL, random_BxL, masked_BxL).astype(input_ids_BxL.dtype)

    # Chosen positions, ascending per row, into P slots (row-major nonzero is ascending).
    rows, cols = np.nonzero(chosen_BxL)
    count_B = chosen_BxL.sum(axis=1)
    slot = np.arange(rows.size) - np.repeat(np.cumsum(count_B) - count_B, count_B)
    positions_BxP = np.zeros((batch, max_predictions_per_seq), np.int64)
    labels_BxP = np.zeros((batch, max_predictions_per_seq), np.int64)
    positions_BxP[rows, slot] = cols
    labels_BxP[rows, slot] = input_ids_BxL[rows, cols]
    weights_BxP = (np.arange(max_predictions_per_seq)[None, :] < count_B[:, None]).astype(
        np.float32
    )
    n_mask, n_random = int(to_mask_BxL.sum()), int(to_random_BxL.sum())
    extra = {} if ngram_counts is None else {"ngram_counts": ngram_counts}
    return {
        **extra,
        "input_ids": masked_BxL,
        "masked_lm_positions": positions_BxP,
        "masked_lm_ids": labels_BxP,
        "masked_lm_weights": weights_BxP,
        "mask_kinds": np.array([n_mask, n_random, rows.size - n_mask - n_random], np.int64),
    }
