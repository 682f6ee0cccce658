"""One permutation-LM training step of ours (PretrainingTask with objective permutation_lm: XLNetLM,
two-stream attention) equals transformers' XLNetLMHeadModel given the same perm_mask,
target_mapping and labels, on identical weights: the loss, every parameter's gradient (<= 1e-5 of
its norm) and the parameters after one clip + AdamW step against torch.optim.AdamW.

The batch is the input pipeline's: BERT-layout rows (padding, two segments) through
`XLNetLayout.apply`, which re-lays them out (A [SEP] B [SEP] [CLS], segment 2 for [CLS]) and
draws span targets and the factorisation order. transformers gets `perm_mask` as is,
`target_mapping` one-hot of the target positions (`model_inputs`: unused slots all zero) and
labels = the target ids, -100 at unused slots; both losses are the mean over the real targets
(ours + 1e-5 in the denominator, as the masked LM).

Weight decay: google's xlnet (model_utils.AdamWeightDecayOptimizer) excludes names holding
"LayerNorm", "layer_norm" or "bias" but first includes "r_s_bias", "r_r_bias" and "r_w_bias"
explicitly, so the relative-position/segment biases ARE decayed there, and so are `mask_emb` and
`seg_embed`; the LM output bias (`lm_loss/bias`) is not. (Its scripts default to weight_decay=0,
i.e. plain Adam; transformers' Trainer, which excludes every name holding "bias", would not decay
r_*_bias.) Ours follows xlnet's rule and torch's AdamW here is given the same rule.
"""

from __future__ import annotations

import tempfile

import jax
import numpy as np
import torch
import transformers
from step_parity import TINY_SIZE as SIZE
from step_parity import encoder_batch, long, perturbed, step_parity

from bert_jax.arch.xlnet.checkpoints import export_xlnet
from bert_jax.arch.xlnet.pretraining import model_inputs
from bert_jax.config import preset
from bert_jax.objectives import permutation_lm
from bert_jax.objectives.losses import DENOMINATORS
from bert_jax.pretraining.task import PretrainingTask
from bert_jax.train import optimizer as optimizer_lib

VOCAB, BATCH, SEQ, PRED = 300, 4, 32, 6
XLNET_DECAYED = ("r_s_bias", "r_r_bias", "r_w_bias")  # google xlnet's include_in_weight_decay


def xlnet_decays(name: str) -> bool:
    """google xlnet's AdamWeightDecayOptimizer rule, on an HF name."""
    if any(s in name for s in XLNET_DECAYED):
        return True
    return not any(s in name for s in ("LayerNorm", "layer_norm", "bias"))


def xlnet_batch() -> dict[str, np.ndarray]:
    """A BERT-layout batch (rows 1 and 3 padded) as the input pipeline lays it out for XLNet."""
    raw = encoder_batch(VOCAB, BATCH, SEQ, PRED)
    raw["input_ids"][:, 0] = 2  # [CLS], moved to the last real slot by the layout
    layout = permutation_lm.XLNetLayout()
    batch = layout.apply(raw, np.arange(BATCH), PRED, seed=0)
    return {"input_mask": raw["input_mask"], **batch}


def hf_tensors(cfg, tree) -> dict[str, np.ndarray]:
    """A tree shaped like our params (weights or gradients) under HF names, via `export_xlnet`."""
    from safetensors.numpy import load_file

    with tempfile.TemporaryDirectory() as d:
        export_xlnet(cfg, jax.device_get(tree), d)
        return load_file(f"{d}/model.safetensors")


def _run(denominators: dict | None = None):
    """`denominators` replaces our loss denominator (a deliberately wrong normalisation)."""
    bert = preset("tiny", **SIZE, vocab_size=VOCAB, max_position_embeddings=64)
    task = PretrainingTask(bert, BATCH, SEQ, PRED, objective="permutation_lm")
    batch = xlnet_batch()
    w = batch["masked_lm_weights"]
    assert (w == 0).any() and (batch["input_mask"] == 0).any() and batch["perm_mask"].any()
    init = task.model.init(jax.random.PRNGKey(0), **task.model_inputs(batch))["params"]
    params = perturbed(init)
    cfg = task.model.config
    with tempfile.TemporaryDirectory() as d:
        export_xlnet(cfg, jax.device_get(params), d)
        model = transformers.XLNetLMHeadModel.from_pretrained(d, attn_implementation="eager")
    model = model.float().eval()  # eval: no dropout (rate 0 anyway)
    assert model.lm_loss.weight is model.transformer.word_embedding.weight
    ins = jax.device_get(model_inputs(batch))
    f32 = lambda k: torch.tensor(np.asarray(ins[k]), dtype=torch.float32)  # noqa: E731
    inputs = dict(
        input_ids=long(batch["input_ids"]), token_type_ids=long(batch["segment_ids"]),
        attention_mask=f32("input_mask_BxL"), perm_mask=f32("perm_mask_BxLxL"),
        target_mapping=f32("target_mapping_BxPxL"),
        labels=long(np.where(w > 0, batch["masked_lm_ids"], -100)),
    )  # fmt: skip
    ours_batch = dict(batch, **({DENOMINATORS: denominators} if denominators else {}))
    rng = jax.random.PRNGKey(0)
    return step_parity(
        lambda p: task.loss_fn(p, ours_batch, rng, True), params, lambda t: hf_tensors(cfg, t),
        model, lambda m: m(**inputs).loss, decays=xlnet_decays,
    )  # fmt: skip


# Measured worst (float32, CPU): loss 5.8e-7 relative (the + 1e-5 over 15 real targets),
# gradient 5.0e-7 of its norm, step 1.2e-5 lr.
def test_step_matches_transformers():
    report = _run()
    report.check()
    print(report.worst())


def test_comparison_fails_on_counting_the_unused_slots():
    """Normalising by every prediction slot (unused ones included) is not transformers' mean."""
    report = _run(denominators={"masked_lm": np.float32(BATCH * PRED)})
    assert any(f.startswith("loss") for f in report.failures())


def test_comparison_fails_on_a_wrong_decay_rule(monkeypatch):
    """transformers' Trainer rule (no decay for any name holding "bias") on our side: the
    relative-position biases then miss the decay that xlnet gives them."""

    def trainer_rule(params):
        def keep(path, _):
            names = [str(getattr(k, "key", k)) for k in path]
            return not any("bias" in n or "layer_norm" in n for n in names)

        return jax.tree_util.tree_map_with_path(keep, params)

    monkeypatch.setattr(optimizer_lib, "decay_mask", trainer_rule)
    bad = _run().failures()
    assert bad and all(f.startswith("step") and "_bias" in f for f in bad), bad
