"""One span-corruption training step of ours (Seq2SeqTask.loss_fn on EncoderDecoder) equals
transformers' T5ForConditionalGeneration called with `labels`, on identical weights: the loss,
every parameter's gradient (<= 1e-5 of its norm) and the parameters after one clip + AdamW step
against torch.optim.AdamW. Both T5 layouts: v1.1 (gated-GELU, untied head, what t5.py trains)
and v1.0 (ReLU, head tied to the embedding with the d_model**-0.5 output rescale).

Normalisation: ours is sum(token CE) / (real target tokens + 1e-5), transformers' the mean over
labels != -100 (its padding), so both are the mean over real target tokens (the + 1e-5 is 5e-7
relative with the 19 real target tokens here). Mesh TensorFlow's T5 (the paper's runs) divides
instead by the size of the targets tensor, padding included (`Unitransformer.loss_denominator`),
and t5x by a constant `loss_normalizing_factor` (none by default: the sum; its fine-tuning configs
set 233472 = 2048 x 114 to match Mesh TF). A constant scale is nearly invisible to Adafactor
or Adam updates (up to eps); what differs is the weighting: there every real target token
counts the same across batches, here (and in transformers) every batch does. Ours follows
transformers, so no adjustment is needed; the broken case below feeds ours Mesh TF's
denominator and checks that the comparison then fails.

Weight decay: T5 itself trained with Adafactor and no decay. transformers' span-corruption
pretraining example (examples/flax/language-modeling/run_t5_mlm_flax.py, AdamW) excludes the
RMS norm scales (`layer_norm`, `final_layer_norm`) and biases (T5 has none) and decays the
rest, `relative_attention_bias` included. torch's AdamW here follows that rule, and so does
ours (`decay_mask` leaves out the encoder-decoder's `*_norm` scales; it decayed them before).
"""

from __future__ import annotations

import tempfile

import jax
import numpy as np
import pytest
import transformers
from step_parity import long, perturbed, step_parity

from bert_jax.arch.seq2seq import Seq2SeqConfig
from bert_jax.arch.seq2seq.t5_checkpoints import export_t5
from bert_jax.arch.seq2seq.train_task import Seq2SeqTask
from bert_jax.objectives import span_corruption
from bert_jax.objectives.losses import DENOMINATORS
from bert_jax.train import optimizer as optimizer_lib

VOCAB = 160  # the last 100 ids are sentinels (vocab_size - 1 - i), text ids below 60
SIZE = dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_decoder_layers=2,
            num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
            dropout_rate=0.0)  # fmt: skip
LAYOUTS = {
    "v1_1": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                 scale_decoder_outputs=False),
    "v1_0": dict(feed_forward_proj="relu", tie_word_embeddings=True, scale_decoder_outputs=True),
}  # fmt: skip
INPUTS = 24
RAW, TARGETS = span_corruption.random_spans_helper(INPUTS)  # 26 raw tokens -> 24 inputs, 6 targets


def t5_decays(name: str) -> bool:
    """run_t5_mlm_flax.py's AdamW mask on HF names: every weight but the norms and biases."""
    return "layer_norm" not in name and not name.endswith(".bias")


def span_batch(batch: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    """Span-corrupted rows, padded: rows 0 and 2 full chunks, rows 1 and 3 shorter documents
    (padding in both inputs and targets)."""
    rng = np.random.default_rng(seed)
    inputs, targets = [], []
    for n in [RAW, 12, RAW, 7][:batch]:
        tokens = rng.integers(2, VOCAB - 100, n)
        x, y = span_corruption.corrupt(tokens, rng, VOCAB)
        inputs.append(span_corruption.pad_to(x, INPUTS))
        targets.append(span_corruption.pad_to(y, TARGETS))
    return {"inputs": np.stack(inputs).astype(np.int32),
            "targets": np.stack(targets).astype(np.int32)}  # fmt: skip


def hf_tensors(cfg: Seq2SeqConfig, tree) -> dict[str, np.ndarray]:
    """A tree shaped like our params (weights or gradients) under HF names, via `export_t5`."""
    from safetensors.numpy import load_file

    with tempfile.TemporaryDirectory() as d:
        export_t5(cfg, jax.device_get(tree), d)
        return load_file(f"{d}/model.safetensors")


def _run(layout: str, denominators: dict | None = None):
    """`denominators` replaces our loss denominator (a deliberately wrong normalisation)."""
    cfg = Seq2SeqConfig(**SIZE, **LAYOUTS[layout])
    task = Seq2SeqTask(cfg, 4, INPUTS, TARGETS)
    batch = span_batch()
    assert (batch["targets"] == 0).any() and (batch["inputs"] == 0).any()
    init = task.model.init(jax.random.PRNGKey(0), **task.model_inputs(batch))["params"]
    params = perturbed(init)
    with tempfile.TemporaryDirectory() as d:
        export_t5(cfg, jax.device_get(params), d)
        model = transformers.T5ForConditionalGeneration.from_pretrained(
            d, attn_implementation="eager"
        )
    model = model.float().eval()  # eval: no dropout (rate 0 anyway)
    # transformers 5 reads tie_word_embeddings=false as "no rescale" and ties the head unless
    # the file holds a different lm_head.weight, as v1.1's does.
    assert (model.lm_head.weight is model.shared.weight) == cfg.tie_word_embeddings
    inputs = dict(
        input_ids=long(batch["inputs"]),
        attention_mask=long(batch["inputs"] != cfg.pad_token_id),
        # transformers shifts the labels right itself (-100 read back as padding).
        labels=long(np.where(batch["targets"] != cfg.pad_token_id, batch["targets"], -100)),
    )
    ours_batch = dict(batch, **({DENOMINATORS: denominators} if denominators else {}))
    rng = jax.random.PRNGKey(0)
    return step_parity(
        lambda p: task.loss_fn(p, ours_batch, rng, True), params,
        lambda t: hf_tensors(cfg, t), model, lambda m: m(**inputs).loss, decays=t5_decays,
    )  # fmt: skip


# Measured worst (float32, CPU): v1_1 loss 5.4e-7 relative (the + 1e-5 over 19 real target
# tokens), gradient 1.1e-6 of its norm, step 2.4e-5 lr (two float32 ulps of a norm scale near 1);
# v1_0 loss 2.6e-7, gradient 5.5e-7, step 2.4e-5 lr.
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_step_matches_transformers(layout):
    report = _run(layout)
    report.check()
    print(layout, report.worst())


def test_comparison_fails_on_mesh_tf_normalisation():
    """Mesh TF's denominator (every target slot, padding included) is not transformers'."""
    report = _run("v1_1", denominators={"targets": np.float32(4 * TARGETS)})
    assert any(f.startswith("loss") for f in report.failures())
    assert any(f.startswith("gradient") for f in report.failures())


def test_comparison_fails_on_decaying_the_norms(monkeypatch):
    """Decaying the RMS norm scales too (our decay mask did, reading only "layer_norm" names)
    moves each by about wd x lr = 1e-2 lr."""
    monkeypatch.setattr(optimizer_lib, "decay_mask", lambda p: jax.tree.map(lambda _: True, p))
    report = _run("v1_1")
    bad = report.failures()
    assert bad and all(f.startswith("step") and "layer_norm" in f for f in bad), bad
