"""One training step of ours against the Hugging Face class that defines the loss, on identical
weights: the loss, every parameter's gradient and the parameters after one optimizer step.

    report = step_parity(
        our_loss=lambda p: task.loss_fn(p, batch, rng, True),   # (loss, metrics)
        params=params,                                           # our (unboxed) tree
        to_hf=lambda tree: hf_tensors(bert_config, tree),        # our tree -> {HF name: array}
        torch_model=hf_model,                                    # dropout off (eval() is fine)
        torch_loss=lambda m: m(**inputs, labels=...).loss,
    )
    report.check()

The gradients go through the same mapping as the weights (`to_hf` is linear: reshapes and
transposes), so each HF parameter's gradient is compared with ours under its own name. The
optimizer is ours (`bert_jax.train.optimizer.make_optimizer`: global-norm clip, then AdamW with the
LayerNorm/bias exclusions) against `torch.nn.utils.clip_grad_norm_` + `torch.optim.AdamW` with the
reference's exclusions spelled on the HF names (google-research/bert: "LayerNorm", "layer_norm",
"bias"). Both sides are float32 with dropout off.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from typing import Any

import jax
import ml_collections
import numpy as np
import optax
import torch

from bert_jax.train.optimizer import make_optimizer

# The masked-LM mean divides by (number of targets + 1e-5), as run_pretraining.py does, where
# transformers divides by the number of targets: 6e-7 relative with 17 targets.
LOSS_RTOL = 2e-6
GRAD_TOL = 1e-5  # max |g_ours - g_hf| / ||g_hf||, per parameter (the bound)
# An analytically zero gradient (attention key biases: softmax ignores a per-query constant) is
# rounding noise on both sides (measured 1e-11 against a whole gradient of norm 2.7), so a
# parameter's norm is floored at this fraction of the whole gradient's norm.
GRAD_FLOOR = 1e-4
# After one step from the same gradients: max |p_ours - p_hf| / learning rate. One Adam step moves
# every weight by about the learning rate (1e-2 here, so that one float32 ulp of a LayerNorm scale
# near 1 is 1.2e-5 lr); a wrong decay exclusion moves a LayerNorm scale by wd lr = 1e-2 lr and a
# bias of 0.05 by 5e-4 lr, five times this bound.
STEP_TOL = 1e-4
# The encoders' size in these tests (vocab and batch are each file's).
TINY_SIZE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip
# google-research/bert's optimizer skips decay for names holding these (on HF names).
NO_DECAY = ("LayerNorm", "layer_norm", "bias")


def reference_decays(name: str) -> bool:
    """google-research/bert's rule on an HF name: decay unless the name holds one of NO_DECAY.
    Families whose reference spells another rule pass their own to `step_parity(decays=...)`."""
    return not any(s in name for s in NO_DECAY)


def optimizer_config(**overrides: Any) -> ml_collections.ConfigDict:
    """The optimizer keys of a training config: AdamW at a constant 1e-2, clip 1.0, decay 0.01."""
    c = ml_collections.ConfigDict(
        dict(
            optimizer="adamw", schedule="constant", learning_rate=1e-2, train_steps=10,
            warmup_steps=0, weight_decay=0.01, adam_b1=0.9, adam_b2=0.999, adam_eps=1e-6,
            max_grad_norm=1.0, layerwise_lr_decay=1.0,
        )
    )  # fmt: skip
    c.update(overrides)
    return c


def perturbed(params: Any, seed: int = 1, scale: float = 0.05) -> Any:
    """Every weight plus N(0, scale): biases and LayerNorms leave their 0/1 initialisation, so a
    wrong weight-decay exclusion or a dropped bias gradient shows."""
    from flax.core import meta

    leaves, treedef = jax.tree.flatten(meta.unbox(params))
    keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
    noise = [jax.random.normal(k, x.shape, x.dtype) for x, k in zip(leaves, keys, strict=True)]
    noisy = [x + scale * n for x, n in zip(leaves, noise, strict=True)]
    return jax.tree.unflatten(treedef, noisy)


def encoder_batch(
    vocab_size: int, batch: int = 4, seq_len: int = 16, predictions: int = 5, seed: int = 0
) -> dict[str, np.ndarray]:
    """A pretraining batch in the shard schema with padding rows and unused prediction slots:
    rows 1 and 3 padded, rows 0 and 2 with masked_lm_weights 0 at their last slots."""
    rs = np.random.RandomState(seed)
    ids = rs.randint(5, vocab_size, (batch, seq_len)).astype(np.int32)
    mask = np.ones((batch, seq_len), np.int32)
    mask[1, seq_len - 5 :] = 0
    mask[3, seq_len // 2 :] = 0
    ids *= mask
    seg = (np.arange(seq_len)[None] >= seq_len // 2 - 2).astype(np.int32) * mask
    weights = np.ones((batch, predictions), np.float32)
    weights[0, -1] = 0
    weights[2, -2:] = 0
    pos = np.stack([np.sort(rs.choice(np.arange(1, seq_len // 2), predictions, replace=False))
                    for _ in range(batch)]).astype(np.int32) * (weights > 0)  # fmt: skip
    return dict(
        input_ids=ids,
        input_mask=mask,
        segment_ids=seg,
        masked_lm_positions=pos,
        masked_lm_ids=(rs.randint(5, vocab_size, (batch, predictions)) * (weights > 0)).astype(
            np.int32
        ),
        masked_lm_weights=weights,
        next_sentence_labels=np.array([0, 1, 1, 0] * (batch // 4 + 1), np.int32)[:batch],
        example_mask=np.ones((batch,), np.float32),
    )


def mlm_labels(batch: dict[str, np.ndarray]) -> torch.Tensor:
    """transformers' masked-LM labels: the target id at each predicted position, -100 elsewhere."""
    labels = np.full(batch["input_ids"].shape, -100, np.int64)
    for b, p in zip(*np.nonzero(batch["masked_lm_weights"]), strict=True):
        labels[b, batch["masked_lm_positions"][b, p]] = batch["masked_lm_ids"][b, p]
    return torch.tensor(labels)


def long(x: np.ndarray) -> torch.Tensor:
    return torch.tensor(np.asarray(x), dtype=torch.long)


def hf_tensors(config: Any, tree: Any, task: Any = None) -> dict[str, np.ndarray]:
    """An encoder-family tree (weights or gradients) under HF names, through `export_hf`."""
    from safetensors.numpy import load_file

    from bert_jax.arch.bert.hf import export_hf

    with tempfile.TemporaryDirectory() as d:
        export_hf(config, jax.device_get(tree), d, task=task)
        return load_file(f"{d}/model.safetensors")


def hf_model(config: Any, params: Any, cls: type, task: Any = None) -> torch.nn.Module:
    """transformers' `cls` loaded from our weights as `export_hf` writes them (config.json too)."""
    from bert_jax.arch.bert.hf import export_hf

    with tempfile.TemporaryDirectory() as d:
        export_hf(config, jax.device_get(params), d, task=task)
        model = cls.from_pretrained(d, attn_implementation="eager")
    return model.float().eval()  # eval: no dropout; gradients flow all the same


def load_into(model: torch.nn.Module, tensors: dict[str, np.ndarray]) -> None:
    """Every trainable HF parameter from `tensors`; a name missing there must be tied to one
    that was given (e.g. the MLM decoder to the word embeddings)."""
    state = {k: torch.tensor(np.asarray(v, np.float32)) for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, f"ours has weights HF's class lacks: {unexpected}"
    given = {p.data_ptr() for n, p in model.named_parameters(remove_duplicate=False) if n in state}
    params = dict(model.named_parameters(remove_duplicate=False))
    untied = [k for k in missing if k in params and params[k].data_ptr() not in given]
    assert not untied, f"HF parameters ours does not give: {untied}"


def torch_grads(model: torch.nn.Module, torch_loss: Callable) -> tuple[float, dict]:
    model.zero_grad(set_to_none=True)
    loss = torch_loss(model)
    loss.backward()
    grads = {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()
             if p.grad is not None}  # fmt: skip
    return float(loss.detach()), grads


def torch_adamw_step(
    model: torch.nn.Module, config: Any, decays: Callable[[str], bool] = reference_decays
) -> dict[str, np.ndarray]:
    """One clip + AdamW step on the gradients already in `model`; the new parameters."""
    named = [(n, p) for n, p in model.named_parameters() if p.grad is not None]
    decay = [p for n, p in named if decays(n)]
    no_decay = [p for n, p in named if not decays(n)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=config.learning_rate, betas=(config.adam_b1, config.adam_b2), eps=config.adam_eps,
    )  # fmt: skip
    if config.max_grad_norm:
        torch.nn.utils.clip_grad_norm_([p for _, p in named], config.max_grad_norm)
    opt.step()
    return {n: p.detach().numpy().copy() for n, p in named}


@dataclasses.dataclass
class StepReport:
    loss_ours: float
    loss_hf: float
    grad_errors: dict[str, float]  # HF name -> max |diff| / ||g_hf||
    step_errors: dict[str, float]  # HF name -> max |diff| / learning rate
    unmatched: list[str]  # HF parameters with a gradient that ours has no tensor for

    @property
    def loss_error(self) -> float:
        return abs(self.loss_ours - self.loss_hf) / max(abs(self.loss_hf), 1e-12)

    def failures(self) -> list[str]:
        out = []
        if self.loss_error > LOSS_RTOL:
            out.append(f"loss {self.loss_ours:.8f} vs HF {self.loss_hf:.8f}")
        out += [f"gradient {k}: {v:.2e}" for k, v in self.grad_errors.items() if v > GRAD_TOL]
        out += [f"step {k}: {v:.2e} lr" for k, v in self.step_errors.items() if v > STEP_TOL]
        out += [f"no tensor of ours for {k}" for k in self.unmatched]
        return out

    def check(self) -> None:
        bad = self.failures()
        assert not bad, "\n".join(bad[:20])

    def worst(self) -> str:
        g = max(self.grad_errors.values())
        s = max(self.step_errors.values()) if self.step_errors else 0.0
        return f"loss {self.loss_error:.1e} rel, gradient {g:.1e} of norm, step {s:.1e} lr"


def step_parity(
    our_loss: Callable[[Any], tuple[jax.Array, Any]],
    params: Any,
    to_hf: Callable[[Any], dict[str, np.ndarray]],
    torch_model: torch.nn.Module,
    torch_loss: Callable[[torch.nn.Module], torch.Tensor],
    config: Any = None,
    decays: Callable[[str], bool] = reference_decays,
) -> StepReport:
    """`our_loss(params) -> (loss, aux)`; `to_hf` maps a tree shaped like `params`; `decays(HF
    name)` says which of transformers' parameters torch's AdamW decays."""
    config = config or optimizer_config()
    torch.manual_seed(0)
    load_into(torch_model, to_hf(params))
    (loss, _), grads = jax.jit(jax.value_and_grad(our_loss, has_aux=True))(params)
    tx, _ = make_optimizer(config)
    updates, _ = tx.update(grads, tx.init(params), params)
    new_params = optax.apply_updates(params, updates)

    loss_hf, grads_hf = torch_grads(torch_model, torch_loss)
    ours_g, ours_p = to_hf(grads), to_hf(new_params)
    # The optimizer is compared on the same gradients (ours): Adam divides by sqrt(v) + eps, which
    # would turn gradient rounding where |g| < eps into update differences of up to lr / 100.
    for name, p in torch_model.named_parameters():
        if p.grad is not None and name in ours_g:
            p.grad = torch.tensor(np.asarray(ours_g[name], np.float32).reshape(p.shape))
    new_hf = torch_adamw_step(torch_model, config, decays)
    grad_errors, step_errors, unmatched = {}, {}, []
    floor = GRAD_FLOOR * float(np.sqrt(sum(np.sum(np.square(g, dtype=np.float64))
                                           for g in grads_hf.values())))  # fmt: skip
    for name, g_hf in grads_hf.items():
        if name not in ours_g:
            unmatched.append(name)
            continue
        g = np.asarray(ours_g[name], np.float64).reshape(g_hf.shape)
        norm = max(float(np.linalg.norm(g_hf)), floor)
        grad_errors[name] = float(np.max(np.abs(g - g_hf))) / norm
        p = np.asarray(ours_p[name], np.float64).reshape(g_hf.shape)
        step_errors[name] = float(np.max(np.abs(p - new_hf[name]))) / config.learning_rate
    return StepReport(float(loss), loss_hf, grad_errors, step_errors, unmatched)
