"""One training step of each encoder pretraining objective equals transformers' on identical
weights: the loss, every parameter's gradient (<= 1e-5 of its norm) and the parameters after one
clip + AdamW step against torch.optim.AdamW with the reference's decay exclusions.

MLM+NSP: BertForPreTraining; MLM+SOP: AlbertForPreTraining (factorised embeddings, one shared
layer); masked LM with a dynamic mask: RobertaForMaskedLM (the mask is a batch like any other);
left-to-right LM: BertLMHeadModel. Each test also breaks our side on purpose (a loss normalised
by the prediction slots instead of the real targets, a weight-decay mask that decays LayerNorms
and biases) and checks that the comparison then fails.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
import transformers
from step_parity import (
    TINY_SIZE as SIZE,
)
from step_parity import (
    encoder_batch,
    hf_model,
    hf_tensors,
    long,
    mlm_labels,
    perturbed,
    step_parity,
)

from bert_jax.arch.bert.variants import get_variant
from bert_jax.config import preset
from bert_jax.objectives.losses import DENOMINATORS
from bert_jax.objectives.masking import MaskingSpec, mask_batch
from bert_jax.pretraining.task import PretrainingTask
from bert_jax.train import optimizer as optimizer_lib

VOCAB = 300


def _config(family: str, causal: bool = False):
    switches = {k: v for k, v in get_variant(family).switches.items()
                if k not in ("vocab_size", "max_position_embeddings")}  # fmt: skip
    if family == "albert":
        switches["embedding_size"] = 16
    offset = switches.get("position_offset", 0)
    return preset("tiny", **{**switches, **SIZE, "family": family, "vocab_size": VOCAB,
                             "max_position_embeddings": 64 + offset, "causal": causal})  # fmt: skip


def _task(family: str, objective: str) -> tuple[PretrainingTask, dict, dict]:
    causal = objective == "ltr"
    task = PretrainingTask(_config(family, causal), 4, 16, 5, objective=objective)
    batch = encoder_batch(VOCAB)
    if family == "roberta":  # its padding id is 1; the mask is drawn here, as the input
        # pipeline's dynamic masking draws it per step (80/10/10 over the real tokens)
        ids = np.where(batch["input_mask"] == 1, batch["input_ids"], 1)
        spec = MaskingSpec(4, VOCAB, special_ids=(0, 2, 1), masked_lm_prob=0.3)
        masked = mask_batch(ids, batch["input_mask"], np.arange(len(ids)), spec, 5, seed=3)
        batch.update({k: v.astype(batch[k].dtype) for k, v in masked.items() if k in batch})
        assert np.any(masked["input_ids"] == 4) and np.any(masked["masked_lm_weights"] == 0)
    batch = {k: batch[k] for k in task.init_inputs()}
    init = task.model.init(jax.random.PRNGKey(0), **task.model_inputs(batch))["params"]
    return task, batch, perturbed(init)


CASES = {
    # case: (family, objective, transformers class whose loss is the reference)
    "mlm_nsp": ("bert", "mlm_nsp", "BertForPreTraining"),
    "mlm_sop": ("albert", "mlm_sop", "AlbertForPreTraining"),
    "mlm_dynamic": ("roberta", "mlm", "RobertaForMaskedLM"),
    "ltr": ("bert", "ltr", "BertLMHeadModel"),
}


def _torch_loss(case: str, batch: dict):
    inputs = dict(input_ids=long(batch["input_ids"]), attention_mask=long(batch["input_mask"]))
    if case != "mlm_dynamic":
        inputs["token_type_ids"] = long(batch["segment_ids"])
    pair = long(batch.get("next_sentence_labels", 0))
    if case == "mlm_nsp":
        extra = dict(labels=mlm_labels(batch), next_sentence_label=pair)
    elif case == "mlm_sop":
        extra = dict(labels=mlm_labels(batch), sentence_order_label=pair)
    elif case == "ltr":  # next-token labels: every real token (transformers shifts them itself)
        extra = dict(labels=long(np.where(batch["input_mask"] == 1, batch["input_ids"], -100)))
    else:
        extra = dict(labels=mlm_labels(batch))
    return lambda model: model(**inputs, **extra).loss


def _run(case: str, denominators: dict | None = None):
    """`denominators` replaces our loss denominators (a deliberately wrong normalisation)."""
    family, objective, cls = CASES[case]
    task, batch, params = _task(family, objective)
    model = hf_model(task.bert_config, params, getattr(transformers, cls))
    assert getattr(model.config, "is_decoder", False) == (case == "ltr")  # causal attention
    ours_batch = dict(batch, **({DENOMINATORS: denominators} if denominators else {}))
    rng = jax.random.PRNGKey(0)
    return step_parity(
        lambda p: task.loss_fn(p, ours_batch, rng, True), params,
        lambda t: hf_tensors(task.bert_config, t), model, _torch_loss(case, batch),
    )  # fmt: skip


# Measured worst (float32, CPU): loss 5.7e-7 relative (the reference's + 1e-5 in the masked-LM
# denominator), gradient 6.3e-7 of its norm, parameters after the step 1.2e-5 lr (one ulp).
@pytest.mark.parametrize("case", list(CASES))
def test_step_matches_transformers(case):
    report = _run(case)
    report.check()
    print(case, report.worst())


def test_comparison_fails_on_a_wrong_normalisation():
    """The masked-LM mean over every prediction slot (20) instead of the real targets (17)."""
    report = _run("mlm_nsp", denominators={"masked_lm": 20.0})
    assert any(f.startswith("loss") for f in report.failures())
    assert any(f.startswith("gradient") for f in report.failures())


def test_comparison_fails_on_a_wrong_decay_mask(monkeypatch):
    """Decay on LayerNorm scales and biases too: the step test names them."""
    monkeypatch.setattr(optimizer_lib, "decay_mask", lambda p: jax.tree.map(lambda _: True, p))
    failures = _run("mlm_dynamic").failures()
    assert failures and all(f.startswith("step") for f in failures)
    assert any("LayerNorm" in f for f in failures) and any(".bias" in f for f in failures)
