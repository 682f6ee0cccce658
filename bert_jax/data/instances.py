"""Training instances from tokenized documents, as google-research/bert builds them.

Pure functions over token ids (a document is a list of sentences, a sentence a list of ids), used
by the reference-compatible runner, the fast local runner and the Beam pipeline alike. With a
`random.Random` and the reference masker they consume random numbers in exactly the order of the
reference's `create_instances_from_document` / `truncate_seq_pair` /
`create_masked_lm_predictions`, so `--reference_compat` reproduces its instances. The fast runner
builds unmasked instances and masks whole blocks with `bert_jax.objectives.masking` (the masker
the input pipeline also uses for dynamic masking).

`build_instances` turns documents into instances by an objective's pairing (see
`bert_jax.objectives.base.PAIRINGS`): sentence pairs (BERT's NSP data), swapped pairs (ALBERT's
SOP data) or packed full sentences (RoBERTa FULL-SENTENCES, or DOC-SENTENCES within documents).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence

import numpy as np

from bert_jax.errors import BertJaxError


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    objective: str = "mlm_nsp"  # a bert_jax.objectives name
    dynamic_masking: bool = False  # write unmasked instances; masks are drawn at training time
    # The split of the selected tokens (Table 8 of the paper); None = the objective's own.
    mask_prob: float | None = None  # -> [MASK]
    random_prob: float | None = None  # -> a random token (the rest keep their token)
    # Instances per record: > 1 packs short instances into shared rows (bert_jax.data.batch).
    pack_sequences: int = 1


@dataclasses.dataclass(frozen=True)
class Vocab:
    """What instance building needs from a vocab: special ids, `##` flags, the random-word list."""

    cls_id: int
    sep_id: int
    mask_id: int
    vocab_ids: np.ndarray  # ids in vocab-file order: the reference's `vocab_words`, as ids
    is_continuation: np.ndarray  # bool by id: token starts with "##"

    @classmethod
    def from_token_dict(cls, vocab: dict[str, int], source: str = "vocab") -> Vocab:
        names = ("[CLS]", "[SEP]", "[MASK]")
        if all(t in vocab for t in ("<s>", "</s>", "<mask>")):  # RoBERTa's byte-level BPE
            names = ("<s>", "</s>", "<mask>")
        missing = [t for t in names if t not in vocab]
        if missing:
            raise BertJaxError(
                f"{source}: vocab has no {', '.join(missing)}; BERT pretraining data needs "
                "[CLS], [SEP] and [MASK] tokens (a WordPiece vocab.txt, one token per line)"
            )
        size = max(vocab.values()) + 1
        is_cont = np.zeros(size, dtype=bool)
        for token, idx in vocab.items():
            if token.startswith("##"):
                is_cont[idx] = True
        return cls(
            cls_id=vocab[names[0]],
            sep_id=vocab[names[1]],
            mask_id=vocab[names[2]],
            vocab_ids=np.asarray(list(vocab.values()), dtype=np.int64),
            is_continuation=is_cont,
        )


@dataclasses.dataclass
class Instance:
    input_ids: list[int]  # [CLS] A [SEP] B [SEP] (masked unless dynamic masking), unpadded
    segment_ids: list[int]
    next_sentence_label: int  # 1 = random next (NSP) / swapped (SOP); 0 otherwise
    masked_lm_positions: list[int] = dataclasses.field(default_factory=list)
    masked_lm_ids: list[int] = dataclasses.field(default_factory=list)  # original ids
    mask_kinds: tuple[int, int, int] = (0, 0, 0)  # how many became [MASK], random, kept


Masker = Callable[[list[int], InstanceConfig, Vocab, object], Instance]
Document = Sequence[Sequence[int]]


def num_to_predict(num_tokens: int, cfg: InstanceConfig) -> int:
    """The reference's rule; len includes [CLS]/[SEP]; Python 3 round is half-to-even."""
    return min(cfg.max_predictions_per_seq, max(1, int(round(num_tokens * cfg.masked_lm_prob))))


def mask_reference(ids: list[int], cfg: InstanceConfig, vocab: Vocab, rng: random.Random):
    """create_masked_lm_predictions with the reference's exact random draws."""
    cand: list[list[int]] = []
    is_cont = vocab.is_continuation
    for i, t in enumerate(ids):
        if t == vocab.cls_id or t == vocab.sep_id:
            continue
        if cfg.do_whole_word_mask and cand and is_cont[t]:
            cand[-1].append(i)
        else:
            cand.append([i])
    rng.shuffle(cand)
    out = list(ids)
    budget = num_to_predict(len(ids), cfg)
    picked: list[tuple[int, int]] = []
    covered: set[int] = set()
    kinds = [0, 0, 0]
    num_words = len(vocab.vocab_ids)
    for index_set in cand:
        if len(picked) >= budget:
            break
        if len(picked) + len(index_set) > budget:
            continue
        if any(i in covered for i in index_set):
            continue
        for i in index_set:
            covered.add(i)
            if rng.random() < 0.8:
                out[i] = vocab.mask_id
                kinds[0] += 1
            elif rng.random() < 0.5:
                kinds[2] += 1  # kept
            else:
                out[i] = int(vocab.vocab_ids[rng.randint(0, num_words - 1)])
                kinds[1] += 1
            picked.append((i, ids[i]))
    picked.sort()
    return out, [p for p, _ in picked], [label for _, label in picked], tuple(kinds)


def truncate_seq_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng) -> int:
    """Trim the longer side (ties: B), from the front or back with p=0.5, one `rng.random()`
    per removed token as the reference; simulated on counters, then sliced once. Returns #removed.
    """
    la, lb = len(tokens_a), len(tokens_b)
    a_front = a_back = b_front = b_back = 0
    while la + lb > max_num_tokens:
        front = rng.random() < 0.5
        if la > lb:
            la -= 1
            a_front += front
            a_back += not front
        else:
            lb -= 1
            b_front += front
            b_back += not front
    if a_front or a_back:
        tokens_a[:] = tokens_a[a_front : len(tokens_a) - a_back]
    if b_front or b_back:
        tokens_b[:] = tokens_b[b_front : len(tokens_b) - b_back]
    return a_front + a_back + b_front + b_back


def _finish(tokens_a, tokens_b, label, cfg, vocab, rng, mask_fn) -> Instance:
    ids = [vocab.cls_id, *tokens_a, vocab.sep_id, *tokens_b, vocab.sep_id]
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    if mask_fn is None:
        return Instance(ids, segment_ids, label)
    out, positions, labels, kinds = mask_fn(ids, cfg, vocab, rng)
    return Instance(out, segment_ids, label, positions, labels, kinds)


def create_instances_from_document(
    documents: Sequence[Document],
    doc_index: int,
    cfg: InstanceConfig,
    vocab: Vocab,
    rng: random.Random,
    mask_fn: Masker = mask_reference,
    swap_order: bool = False,
) -> list[Instance]:
    """Sentence-pair instances of one document; `documents` is the pool random B spans come
    from. With `swap_order` (SOP) a two-part chunk is swapped instead of taking a random B."""
    document = documents[doc_index]
    max_num_tokens = cfg.max_seq_length - 3
    target = max_num_tokens
    if rng.random() < cfg.short_seq_prob:
        target = rng.randint(2, max_num_tokens)
    instances: list[Instance] = []
    chunk: list[Sequence[int]] = []
    length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for s in chunk[:a_end] for t in s]
            tokens_b: list[int] = []
            if len(chunk) == 1 or rng.random() < 0.5:
                if swap_order and len(chunk) > 1:
                    tokens_b = [t for s in chunk[a_end:] for t in s]
                    tokens_a, tokens_b = tokens_b, tokens_a
                else:
                    target_b = target - len(tokens_a)
                    for _ in range(10):
                        other = rng.randint(0, len(documents) - 1)
                        if other != doc_index:
                            break
                    other_doc = documents[other]
                    for j in range(rng.randint(0, len(other_doc) - 1), len(other_doc)):
                        tokens_b.extend(other_doc[j])
                        if len(tokens_b) >= target_b:
                            break
                    i -= len(chunk) - a_end  # put the unused sentences back
                label = 1
            else:
                tokens_b = [t for s in chunk[a_end:] for t in s]
                label = 0
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            assert tokens_a and tokens_b
            instances.append(_finish(tokens_a, tokens_b, label, cfg, vocab, rng, mask_fn))
            chunk, length = [], 0
        i += 1
    return instances


def create_full_sentence_instances(
    documents: Sequence[Document],
    cfg: InstanceConfig,
    vocab: Vocab,
    cross_documents: bool = True,
) -> list[Instance]:
    """RoBERTa FULL-SENTENCES, unmasked: [CLS] s1 s2 ... [SEP] packed to max_seq_length - 2
    tokens, with [SEP] between documents; a sentence longer than the limit is cut into pieces.
    `cross_documents=False` is DOC-SENTENCES: every document ends its last instance."""
    limit = cfg.max_seq_length - 2
    instances: list[Instance] = []
    current: list[int] = []

    def emit() -> None:
        body = current[:-1] if current and current[-1] == vocab.sep_id else current
        if body:
            ids = [vocab.cls_id, *body, vocab.sep_id]
            instances.append(Instance(ids, [0] * len(ids), 0))
        current.clear()

    for doc in documents:
        if current and not cross_documents:
            emit()
        if current:
            current.append(vocab.sep_id)
        for sentence in doc:
            pieces = [sentence[k : k + limit] for k in range(0, len(sentence), limit)]
            for piece in pieces:
                if len(current) + len(piece) > limit:
                    emit()
                current.extend(piece)
    emit()
    return instances


def build_instances(
    pairing: str,
    documents: Sequence[Document],
    cfg: InstanceConfig,
    vocab: Vocab,
    rng: random.Random,
    mask_fn: Masker | None = None,
) -> list[Instance]:
    """One pass (one dupe) over `documents` by an objective's pairing; `mask_fn` None leaves the
    instances unmasked (the fast runner masks whole blocks afterwards)."""
    if pairing in ("packed", "packed_docs"):
        if mask_fn is not None:
            raise ValueError("packed instances are built unmasked")
        return create_full_sentence_instances(documents, cfg, vocab, pairing == "packed")
    swap = pairing == "swapped_pairs"
    out: list[Instance] = []
    for d in range(len(documents)):
        out += create_instances_from_document(documents, d, cfg, vocab, rng, mask_fn, swap)
    return out


def instance_features(inst: Instance, cfg: InstanceConfig) -> dict[str, list]:
    """One instance's features, zero-padded, in the reference's insertion order (masks only
    without dynamic masking): the reference-compatible mode's input to the shard encoder."""
    n, length, preds = len(inst.input_ids), cfg.max_seq_length, cfg.max_predictions_per_seq
    assert n <= length, (n, length)
    pad = [0] * (length - n)
    out = {
        "input_ids": list(inst.input_ids) + pad,
        "input_mask": [1] * n + pad,
        "segment_ids": list(inst.segment_ids) + pad,
    }
    if not cfg.dynamic_masking:
        k = len(inst.masked_lm_positions)
        out["masked_lm_positions"] = list(inst.masked_lm_positions) + [0] * (preds - k)
        out["masked_lm_ids"] = list(inst.masked_lm_ids) + [0] * (preds - k)
        out["masked_lm_weights"] = [1.0] * k + [0.0] * (preds - k)
    out["next_sentence_labels"] = [inst.next_sentence_label]
    return out
