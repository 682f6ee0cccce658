"""XLNet's fine-tuning layout from the rows the task featurizers write.

The GLUE, NER and SQuAD featurizers frame texts with the tokenizer's layout, special token first
and padding last; with XLNet's pieces (`bert_jax.tokenization.layout.XLNET`) a row is
`<cls> A <sep> B <sep> <pad>...`. XLNet (and transformers' XLNetTokenizer) put <cls> last and pad
on the left: `<pad>... A <sep> B <sep> <cls>`, token types 0 (A), 1 (B), 2 (<cls>), 3 (padding).
`relayout` moves every per-token array of a row there; `positions[n, p]` is where position p of
the featurizer's row went, which maps answer positions forward and per-token outputs (tagging,
span logits) back, so scoring and prediction files stay the tasks' own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bert_jax.tokenization.layout import XLNET_CLS_SEGMENT, XLNET_PAD_SEGMENT

_POSITION_KEYS = ("start_positions", "end_positions")


def layout_positions(input_mask_NxL: np.ndarray) -> np.ndarray:
    """[n, p] -> XLNet position of featurizer position p: the first token (<cls>) goes last, the
    other real tokens keep their order right before it, the padding moves to the front."""
    n, length = input_mask_NxL.shape
    real_Nx1 = input_mask_NxL.sum(1, keepdims=True).astype(np.int64)
    p_1xL = np.arange(length)[None]
    pos_NxL = np.where(p_1xL < real_Nx1, length - real_Nx1 + p_1xL - 1, p_1xL - real_Nx1)
    pos_NxL[:, 0] = length - 1
    return pos_NxL


def relayout(arrays: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The rows in XLNet's layout and the positions map (`layout_positions`). Arrays of shape
    [N, L, ...] move with the tokens; answer positions are mapped; the rest is kept."""
    mask_NxL = arrays["input_mask"]
    n, length = mask_NxL.shape
    pos_NxL = layout_positions(mask_NxL)
    out: dict[str, np.ndarray] = {}
    for key, value in arrays.items():
        if key in _POSITION_KEYS:
            out[key] = np.take_along_axis(pos_NxL, value[:, None].astype(np.int64), 1)[:, 0]
            out[key] = out[key].astype(value.dtype)
        elif value.ndim >= 2 and value.shape[:2] == (n, length):
            moved = np.empty_like(value)
            index = pos_NxL.reshape(n, length, *[1] * (value.ndim - 2))
            np.put_along_axis(moved, np.broadcast_to(index, value.shape), value, axis=1)
            out[key] = moved
        else:
            out[key] = value
    segments_NxL = out["segment_ids"].copy()
    segments_NxL[out["input_mask"] == 0] = XLNET_PAD_SEGMENT
    segments_NxL[:, -1] = XLNET_CLS_SEGMENT
    out["segment_ids"] = segments_NxL
    return out, pos_NxL


def back_to_featurizer_layout(outputs: Any, pos_NxL: np.ndarray) -> Any:
    """Per-token outputs ([N, L, ...] arrays, or a tuple of them) in the featurizer's order."""
    if isinstance(outputs, tuple):
        return tuple(back_to_featurizer_layout(o, pos_NxL) for o in outputs)
    index = pos_NxL.reshape(*pos_NxL.shape, *[1] * (outputs.ndim - 2))
    return np.take_along_axis(outputs, np.broadcast_to(index, outputs.shape), 1)
