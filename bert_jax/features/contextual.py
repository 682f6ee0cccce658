"""The contextual-embedding example: one word, three contexts, two meanings.

In "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi
river bank." the first two "bank"s are the financial institution and the last is a river side. With
real pretrained weights the vectors (sum of the last 4 layers) of the same-meaning pair are closer
(cosine similarity) than either different-meaning pair.
"""

from __future__ import annotations

import numpy as np

from bert_jax.arch.bert.model import BertModel
from bert_jax.config import BertConfig

SENTENCE = (
    "After stealing money from the bank vault, the bank robber was seen fishing on the "
    "Mississippi river bank."
)
LABELS = ("bank vault", "bank robber", "river bank")
SAME_MEANING = (0, 1)


def bank_vectors(config: BertConfig, params: dict, tokenizer) -> np.ndarray:
    """3 x D: each "bank" as the sum of the last four layers' hidden states."""
    params = params.get("bert", params)
    tokens = ["[CLS]", *tokenizer.tokenize(SENTENCE), "[SEP]"]
    ids_1xL = np.asarray([tokenizer.convert_tokens_to_ids(tokens)], np.int32)
    out = BertModel(config, add_pooling_layer=False).apply(
        {"params": params}, ids_1xL, output_hidden_states=True
    )
    summed_LxD = sum(np.asarray(h[0], np.float32) for h in out.hidden_states[-4:])
    where = [i for i, t in enumerate(tokens) if t == "bank"]
    if len(where) != 3:
        raise ValueError(f"expected 3 'bank' tokens, the vocabulary gives {tokens}")
    return summed_LxD[where]


def bank_similarities(config: BertConfig, params: dict, tokenizer) -> dict[tuple[int, int], float]:
    v = bank_vectors(config, params, tokenizer)
    v = v / np.linalg.norm(v, axis=-1, keepdims=True)
    return {(i, j): float(v[i] @ v[j]) for i, j in ((0, 1), (0, 2), (1, 2))}


def bank_similarity_table(config: BertConfig, params: dict, tokenizer) -> str:
    """A small text table of the three cosine similarities, same meaning first."""
    sims = bank_similarities(config, params, tokenizer)
    lines = [SENTENCE, "", f"{'pair':<28}{'meaning':<12}cosine"]
    for (i, j), cos in sorted(sims.items(), key=lambda kv: kv[0] != SAME_MEANING):
        meaning = "same" if (i, j) == SAME_MEANING else "different"
        lines.append(f"{LABELS[i] + ' / ' + LABELS[j]:<28}{meaning:<12}{cos:.3f}")
    return "\n".join(lines)
