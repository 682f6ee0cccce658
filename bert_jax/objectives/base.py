"""What an objective declares, once, for every part that needs it.

The data pipeline reads `pairing`, `masking` and `shard_schema` (how instances are built, how
tokens are masked, which features a shard holds); the input pipeline reads `shard_schema` and
`masking` (dynamic masking runs the same masker as the static one); the pretraining task reads
`heads`, `batch_shapes` and `loss`. Nothing here imports JAX: an objective's `loss` imports it
when called, so the data pipeline and Beam workers stay free of the accelerator stack.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from bert_jax.shards.schema import Feature, Schema

# (model outputs, batch) -> (scalar loss, metrics); `outputs` is the pretraining model's output.
LossFn = Callable[[Any, Mapping[str, Any]], tuple[Any, dict[str, Any]]]

# How instances are built from documents (functions of bert_jax.data.instances):
#   "sentence_pairs": [CLS] A [SEP] B [SEP] with B the true continuation or another document's
#                     span (label 1 = random next), as BERT's NSP data
#   "swapped_pairs":  the same pairs with B the continuation, swapped before A with p = 0.5
#                     (label 1 = swapped), as ALBERT's SOP data
#   "packed":         one segment of contiguous sentences packed across documents (label 0)
#   "packed_docs":    the same, but a segment never crosses a document boundary (RoBERTa's
#                     DOC-SENTENCES; a document's last segment may be shorter)
PAIRINGS = ("sentence_pairs", "swapped_pairs", "packed", "packed_docs")
# The one vocabulary of pretraining heads (objectives, the encoder variants in
# bert_jax.arch.bert.variants, and the checkpoint head groups of bert_jax.interop, where the
# sentence-pair layer of both NSP and SOP is the "nsp" group).
HEADS = {
    "mlm": "masked LM: logits at the masked positions",
    "ltr": "left-to-right LM: the same head at every position, causal attention",
    "nsp": "next-sentence prediction on the pooled [CLS]",
    "sop": "sentence-order prediction on the pooled [CLS] (ALBERT)",
    "rtd": "replaced-token detection at every position (ELECTRA's discriminator)",
    "plm": "permutation LM over two-stream attention (XLNet)",
}
# Sentence heads -> the task their metrics are named after (next_sentence_accuracy, ...).
SENTENCE_TASKS = {"nsp": "next_sentence", "sop": "sentence_order"}


@dataclasses.dataclass(frozen=True)
class TokenMasking:
    """Masked-LM corruption: pick `masked_lm_prob` of the real tokens (never specials), then
    replace a picked token by [MASK] with `mask_prob`, by a random id with `random_prob`, and keep
    it otherwise (the paper's 80/10/10)."""

    masked_lm_prob: float = 0.15
    mask_prob: float = 0.8
    random_prob: float = 0.1
    # Spans of n <= max_ngram consecutive tokens, n drawn with probability proportional to 1/n
    # (ALBERT's n-gram masking, max_ngram=3); 1 = single tokens.
    max_ngram: int = 1


@dataclasses.dataclass(frozen=True)
class Objective:
    name: str
    description: str
    pairing: str  # one of PAIRINGS
    masking: TokenMasking | None  # None: the objective predicts no masked tokens
    # Pretraining heads, in the vocabulary of HEADS.
    heads: tuple[str, ...]
    loss: LossFn
    # The label the sentence head predicts, named as stats.json reports its positive fraction.
    label_statistic: str = "label_1_fraction"
    data_flag: str = ""  # the create-pretraining-data --objective value (reference names)
    # The architecture it trains (a `bert_jax.arch.registry` name): the objective names it, nothing
    # guesses it from the heads.
    architecture: str = "bert"
    causal: bool = False  # the encoder attends left to right (BertConfig.causal)
    # A re-layout the input pipeline runs on each decoded batch, for objectives whose model reads
    # another layout than the shards' (XLNet: `permutation_lm.XLNetLayout`); it declares its
    # extra arrays (`extra_shapes(b, l, p)`) and builds them (`apply(batch, index_B, p, seed)`).
    layout: Any = None
    # Its instances can share a record (`pack_sequences` > 1: several per row, `pack_ids`
    # keeping attention inside each): a bidirectional encoder whose model reads packed rows.
    # Not a next-token LM (its last token would predict the next sequence's first), nor the
    # objectives whose models take no `pack_BxL` (ELECTRA, XLNet).
    packable: bool = False

    def __post_init__(self) -> None:
        if self.pairing not in PAIRINGS:
            raise ValueError(f"objective {self.name}: pairing {self.pairing!r} not in {PAIRINGS}")
        if not set(self.heads) <= set(HEADS):
            raise ValueError(f"objective {self.name}: heads {self.heads} not in {tuple(HEADS)}")

    @property
    def sentence_head(self) -> str | None:
        """"next_sentence" or "sentence_order" when the model has a sentence-pair classifier."""
        return next((SENTENCE_TASKS[h] for h in self.heads if h in SENTENCE_TASKS), None)

    def predicted_tokens(self, batch: Mapping[str, Any]) -> float:
        """How many token predictions a batch holds: the weight of its token metrics."""
        if "ltr" in self.heads:  # every real token after the first
            mask_BxL = np.asarray(batch["input_mask"], np.float64)
            return float(np.sum(mask_BxL[:, 1:]))
        return float(np.sum(np.asarray(batch["masked_lm_weights"], np.float64)))

    def predictions_per_seq(self, max_seq_length: int, max_predictions_per_seq: int) -> int:
        """Positions the LM head projects onto the vocabulary per sequence."""
        return max_seq_length if "ltr" in self.heads else max_predictions_per_seq

    def shard_schema(
        self,
        max_seq_length: int,
        max_predictions_per_seq: int,
        static_masks: bool,
        pack_sequences: int = 1,
    ) -> Schema:
        """The features a shard of this objective holds, in the order they are written
        (google-research/bert's order); without static masks the masks are drawn at training
        time and only the unmasked inputs are stored. Packed shards (`pack_sequences` S > 1)
        add `pack_ids` (which instance each token belongs to: 1..S, 0 on padding) and hold one
        sentence label per instance slot (0 in an empty slot)."""
        features = [
            Feature("input_ids", max_seq_length, "int64"),
            Feature("input_mask", max_seq_length, "int64"),
            Feature("segment_ids", max_seq_length, "int64"),
        ]
        if pack_sequences > 1:
            features.append(Feature("pack_ids", max_seq_length, "int64"))
        if static_masks and self.masking is not None:
            features += [
                Feature("masked_lm_positions", max_predictions_per_seq, "int64"),
                Feature("masked_lm_ids", max_predictions_per_seq, "int64"),
                Feature("masked_lm_weights", max_predictions_per_seq, "float32"),
            ]
        features.append(Feature("next_sentence_labels", pack_sequences, "int64"))
        return tuple(features)

    def batch_shapes(
        self,
        batch_size: int,
        max_seq_length: int,
        max_predictions_per_seq: int,
        pack_sequences: int = 1,
    ) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Every array of a training batch: ids as int32, the [B, 1] label squeezed to [B] ([B, S]
        packed), and `example_mask` (1 = real example, 0 = eval padding)."""
        out: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        schema = self.shard_schema(
            max_seq_length, max_predictions_per_seq, static_masks=True,
            pack_sequences=pack_sequences,
        )  # fmt: skip
        for f in schema:
            if f.name == "next_sentence_labels" and self.sentence_head is None:
                continue
            squeeze = f.name == "next_sentence_labels" and f.length == 1  # not 1 prediction
            shape = (batch_size,) if squeeze else (batch_size, f.length)
            out[f.name] = (shape, np.dtype(np.float32 if f.dtype == "float32" else np.int32))
        if self.layout is not None:
            extra = self.layout.extra_shapes(batch_size, max_seq_length, max_predictions_per_seq)
            out.update(extra)
        out["example_mask"] = ((batch_size,), np.dtype(np.float32))
        return out


@dataclasses.dataclass(frozen=True)
class Seq2SeqObjective:
    """An encoder-decoder objective (T5): a chunk of raw token ids -> (inputs, targets), each
    ending with EOS. Its shards hold int64 `inputs` [inputs_length] and `targets`
    [targets_length], zero-padded; the model, loss and metrics are
    `bert_jax.arch.seq2seq.train_task`'s (teacher-forced cross-entropy on the targets), the
    same for every such objective, so it declares no heads or loss of its own."""

    name: str
    description: str
    # inputs_length -> (raw tokens per chunk, targets_length): the geometry of the shards.
    lengths: Callable[[int], tuple[int, int]]
    # (chunk of raw ids, rng, vocab size with sentinels) -> (inputs, targets) with EOS.
    make_example: Callable[[np.ndarray, np.random.Generator, int], tuple[np.ndarray, np.ndarray]]
    uses_sentinels: bool  # targets hold sentinel ids (top of the vocabulary)
    data_flag: str = ""
    architecture: str = "seq2seq"  # the encoder-decoders (`bert_jax.arch.seq2seq.family`)

    def shard_schema(self, inputs_length: int, targets_length: int) -> Schema:
        return (
            Feature("inputs", inputs_length, "int64"),
            Feature("targets", targets_length, "int64"),
        )

    def batch_shapes(
        self, batch_size: int, inputs_length: int, targets_length: int
    ) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        return {
            f.name: ((batch_size, f.length), np.dtype(np.int32))
            for f in self.shard_schema(inputs_length, targets_length)
        }
