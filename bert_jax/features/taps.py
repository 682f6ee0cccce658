"""Values read off a model as it runs (Flax's `capture_intermediates`), so that the inference
commands show what the model itself computed instead of a second implementation of it.

    out, seen = run_with_taps(model, params, wanted, ids, mask)
    probs_BxHxQxK = seen[("encoder", "layer_0", "self_attention", "Dropout_0")][0]

`wanted(path)` picks submodules by their path of names; `seen` maps each picked path to the
outputs of its calls, in call order. T5's and XLNet's attention pass their softmax through a
dropout module, which returns it unchanged at inference: its output is the probabilities.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
from flax.traverse_util import flatten_dict

from bert_jax.errors import BertJaxError

Path = tuple[str, ...]


def run_with_taps(
    model: nn.Module,
    params: Any,
    wanted: Callable[[Path], bool],
    *args: Any,
    method: Callable[..., Any] | None = None,
    **kwargs: Any,
) -> tuple[Any, dict[Path, tuple[Any, ...]]]:
    """(the model's output, {path: outputs of that submodule's calls}) of one `apply`."""

    def keep(module: nn.Module, method_name: str) -> bool:
        return method_name == "__call__" and wanted(tuple(module.path))

    out, state = model.apply(
        {"params": params}, *args, method=method, capture_intermediates=keep,
        mutable=["intermediates"], **kwargs,
    )  # fmt: skip
    seen = flatten_dict(dict(state.get("intermediates", {})))
    return out, {path[:-1]: calls for path, calls in seen.items() if path[-1] == "__call__"}


def probabilities(seen: dict[Path, tuple[Any, ...]], path: Path, call: int = 0) -> Any:
    """The softmax a tapped dropout module received (B x H x Q x K), checked to be one."""
    if path not in seen or len(seen[path]) <= call or getattr(seen[path][call], "ndim", 0) != 4:
        raise BertJaxError(
            f"attention probabilities: the model has no {'/'.join(path)} call {call} to read "
            "them from (bert_jax.features.taps: the model's attention changed shape)"
        )
    return seen[path][call]
