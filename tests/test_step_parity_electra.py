"""One ELECTRA pretraining step of ours equals transformers' on identical weights: the loss, every
parameter's gradient (<= 1e-5 of its norm) and the parameters after one clip + AdamW step against
torch.optim.AdamW with the reference's decay exclusions.

Ours is one module (`ElectraForPreTraining`: generator and discriminator sharing the embedding
tables and their LayerNorm, as ELECTRA's code does); transformers' is two models, the generator
`ElectraForMaskedLM` and the discriminator `ElectraForPreTraining`, which here share the very same
embedding module, so autograd sums both losses' gradients of the shared tables as ours does.
The torch discriminator reads exactly the tokens our generator sampled (our forward's
`ElectraOutput`, same "sample" key as the loss) with labels = our `replaced` mask; the total is
generator MLM + 50 x discriminator (ELECTRA's disc_weight) on both sides. The shape is
ELECTRA-small's, tables narrower than the discriminator (E < H), so both networks project them.

Sampling carries no gradient on either side (the discriminator reads token ids): the gradients of
the generator's own weights match transformers', where only the MLM loss reaches them.
A deliberately broken loss of ours (the discriminator averaged over padding too) must fail.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import numpy as np
import optax
import torch
import transformers
from step_parity import (
    TINY_SIZE as SIZE,
)
from step_parity import (
    StepReport,
    encoder_batch,
    hf_model,
    hf_tensors,
    long,
    mlm_labels,
    perturbed,
    step_parity,
)

from bert_jax.arch.electra.model import (
    ElectraOutput,
    discriminator_params,
    generator_config,
    generator_params,
)
from bert_jax.config import preset
from bert_jax.objectives import electra as electra_objective
from bert_jax.objectives import losses
from bert_jax.pretraining.task import PretrainingTask

VOCAB = 300
EMBED = 16  # E < H: the discriminator projects E -> 32, the generator (H = 8, one head) E -> 8
RNG = jax.random.PRNGKey(0)

# Measured (CPU, float32): loss 4.7e-7 relative (ours divides both means by their count + 1e-5,
# as run_pretraining.py; ELECTRA's code by count + 1e-6, transformers by the count), gradient
# 9.9e-7 of its norm, step 1.2e-5 lr (one float32 ulp of a LayerNorm scale near 1). With E = H
# (ELECTRA-base's shape, no discriminator projection): loss 2.8e-7, gradient 6.9e-7, step 1.2e-5
# lr. The broken loss: loss 8.9e-3 relative, gradient 1.0 of norm.


@functools.cache  # one set-up for the module
def _task() -> tuple[PretrainingTask, dict, dict]:
    config = preset("tiny", **SIZE, embedding_size=EMBED, family="electra", pooler=False,
                    vocab_size=VOCAB, max_position_embeddings=64)  # fmt: skip
    task = PretrainingTask(config, 4, 16, 5, objective="electra")
    batch = encoder_batch(VOCAB)  # padding rows and unused prediction slots
    batch = {k: batch[k] for k in task.init_inputs()}
    # Jitted: op-by-op, init and the noise compile every primitive of every shape (20 s here).
    init = jax.jit(lambda k: perturbed(task.model.init(k, **task.model_inputs(batch))["params"]))
    return task, batch, init(jax.random.PRNGKey(0))


def _forward(task: PretrainingTask, params: dict, batch: dict) -> ElectraOutput:
    """Our forward with the loss's own "sample" key: the generator's samples as the loss sees."""
    return jax.device_get(jax.jit(_apply(task, batch))(params))


def _apply(task: PretrainingTask, batch: dict) -> Callable[[dict], ElectraOutput]:
    rngs = task.family.pretraining_rngs(RNG, True)  # the loss's: {"sample": ...}, no dropout
    inputs = task.model_inputs(batch)
    return lambda p: task.model.apply({"params": p}, **inputs, deterministic=True, rngs=rngs)


def _to_hf(task: PretrainingTask) -> Callable[[dict], dict[str, np.ndarray]]:
    """Our tree -> the pair's names: the shared tables appear under both prefixes (the same values;
    for gradients, ours already summed over both losses)."""
    gen = generator_config(task.bert_config, task.generator_size)

    def to_hf(tree: dict) -> dict[str, np.ndarray]:
        d = hf_tensors(task.bert_config, discriminator_params(tree))
        g = hf_tensors(gen, generator_params(tree))
        return {f"discriminator.{k}": v for k, v in d.items()} | {
            f"generator.{k}": v for k, v in g.items()
        }

    return to_hf


def _pair(task: PretrainingTask, params: dict) -> torch.nn.ModuleDict:
    """transformers' generator and discriminator sharing one embedding module (the generator's
    decoder stays tied to the shared word embeddings). The discriminator comes first, so
    named_parameters() reports each shared tensor once, under `discriminator.`."""
    gen_config = generator_config(task.bert_config, task.generator_size)
    disc = hf_model(task.bert_config, discriminator_params(params),
                    transformers.ElectraForPreTraining)  # fmt: skip
    gen = hf_model(gen_config, generator_params(params), transformers.ElectraForMaskedLM)
    gen.electra.embeddings = disc.electra.embeddings
    gen.generator_lm_head.weight = disc.electra.embeddings.word_embeddings.weight
    assert gen.generator_lm_head.weight is gen.electra.embeddings.word_embeddings.weight
    return torch.nn.ModuleDict({"discriminator": disc, "generator": gen})


def _torch_loss(batch: dict, out: ElectraOutput) -> Callable[[torch.nn.Module], torch.Tensor]:
    """Generator MLM + 50 x discriminator, the discriminator reading our generator's samples.
    A different sample would flip labels and move the loss far past LOSS_RTOL."""
    mask, seg = long(batch["input_mask"]), long(batch["segment_ids"])
    rows, slots = np.nonzero(batch["masked_lm_weights"])  # real prediction slots only
    where = (rows, batch["masked_lm_positions"][rows, slots])
    corrupted, original = batch["input_ids"].copy(), batch["input_ids"].copy()
    corrupted[where] = out.sampled_ids[rows, slots]
    original[where] = batch["masked_lm_ids"][rows, slots]
    replaced = np.asarray(out.replaced)
    # ELECTRA's labels: replaced where the sample differs from the original token.
    np.testing.assert_array_equal(replaced, corrupted != original)
    assert 0 < replaced[batch["input_mask"] == 1].sum() < (batch["input_mask"] == 1).sum()
    weight = electra_objective.DISCRIMINATOR_WEIGHT
    assert weight == 50.0  # ELECTRA's configure_pretraining.py disc_weight

    def loss(pair: torch.nn.Module) -> torch.Tensor:
        gen = pair["generator"](input_ids=long(batch["input_ids"]), attention_mask=mask,
                                token_type_ids=seg, labels=mlm_labels(batch)).loss  # fmt: skip
        disc = pair["discriminator"](input_ids=long(corrupted), attention_mask=mask,
                                     token_type_ids=seg, labels=long(replaced)).loss  # fmt: skip
        return gen + weight * disc

    return loss


def _run(broken: Callable | None = None) -> StepReport:
    """`broken(task, batch)`: a loss of ours to use instead of the task's."""
    task, batch, params = _task()
    out = _forward(task, params, batch)
    ours = broken(task, batch) if broken else (lambda p: task.loss_fn(p, batch, RNG, True))
    return step_parity(ours, params, _to_hf(task), _pair(task, params), _torch_loss(batch, out))


def test_electra_step_matches_transformers() -> None:
    report = _run()
    report.check()
    print("electra", report.worst())


def test_discriminator_loss_does_not_reach_the_generator() -> None:
    """ELECTRA stops gradients at the sampling: the discriminator's loss reaches the generator
    only through the shared tables."""
    task, batch, params = _task()
    term = jax.jit(jax.grad(lambda p: task.loss_fn(p, batch, RNG, True)[1]["replaced_token_loss"]))
    g = term(params)
    assert float(optax.tree.norm(g["generator"])) == 0.0
    assert float(optax.tree.norm(g["bert"]["embeddings"]["word_embeddings"])) > 0.0


def _disc_over_padding(task: PretrainingTask, batch: dict) -> Callable:
    """Broken on purpose: the discriminator's mean also counts the padding tokens."""
    every_slot = {**batch, "input_mask": np.ones_like(batch["input_mask"])}
    apply = _apply(task, batch)
    return lambda p: losses.replaced_token_detection(apply(p), every_slot, 50.0)


def test_a_broken_loss_fails_the_comparison() -> None:
    report = _run(_disc_over_padding)
    failures = report.failures()
    assert any(f.startswith("loss") for f in failures)
    assert any(f.startswith("gradient discriminator.") for f in failures)
    print("broken:", report.worst())
