"""The family switches of the one encoder and the family presets. Each switch is checked against
an equivalent model built without it (shared layers = every layer holding a copy, a position
offset = a shifted position table, ...); looped, scanned and rematerialised layouts agree; the
sharded train step on a 2x2x2 mesh matches one device; the presets' parameter counts equal
transformers' models and the papers' sizes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
import torch
import transformers
from flax.core import meta

from bert_jax.arch.bert.flops import encoder_flops_per_token, pretraining_flops_per_step
from bert_jax.arch.bert.heads import (
    BertForPreTraining,
    BertForReplacedTokenDetection,
    BertForSequenceClassification,
)
from bert_jax.arch.bert.model import BertModel
from bert_jax.arch.bert.variants import VARIANTS, variant_config
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.model.scan import stack_layers, unstack_layers
from bert_jax.pretraining.task import PretrainingTask, synthetic_batch
from bert_jax.train import build_trainer, make_mesh

TINY = dict(vocab_size=120, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
            intermediate_size=48, max_position_embeddings=20)  # fmt: skip
IDS = np.arange(2 * 12).reshape(2, 12) % 117 + 3
MASK = (np.arange(12)[None] < np.array([[12], [7]])).astype(np.int32)
SEG = (np.arange(12)[None] >= 6).astype(np.int32).repeat(2, 0)
POSITIONS = np.array([[1, 3], [2, 5]])


def random_params(model, seed=0, *args):
    """Random values (biases and LayerNorms too) in the unboxed tree `model.init` gives."""
    rng = np.random.RandomState(seed)
    abstract = jax.eval_shape(model.init, jax.random.key(0), *(args or (IDS, MASK, SEG)))
    return jax.tree.map(lambda x: rng.normal(0, 0.2, x.shape).astype(np.float32),
                        meta.unbox(abstract))["params"]  # fmt: skip


def count(tree) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


def test_presets_set_the_families_switches():
    assert set(VARIANTS) == {"bert", "roberta", "albert", "electra", "distilbert"}
    assert variant_config("bert") == BertConfig()
    albert = variant_config("albert", hidden_size=1024, num_attention_heads=16)
    assert (albert.family, albert.embedding_size, albert.share_layers) == ("albert", 128, "all")
    assert albert.hidden_size == 1024 and albert.hidden_dropout_prob == 0.0
    roberta = variant_config("roberta")
    assert (roberta.position_offset, roberta.type_vocab_size, roberta.max_sequence_length) == (
        2, 1, 512)  # fmt: skip
    distil = variant_config("distilbert")
    assert (distil.type_vocab_size, distil.pooler, distil.num_hidden_layers) == (0, False, 6)
    assert VARIANTS["electra"].heads == ("rtd",) and VARIANTS["albert"].heads == ("mlm", "sop")
    with pytest.raises(BertJaxError, match="unknown model family 'xlnet'"):
        variant_config("xlnet")
    with pytest.raises(BertJaxError, match="share_layers 'some'"):
        variant_config("albert", share_layers="some")


@pytest.mark.parametrize(
    "family, overrides, hf_class, hf_config, paper_millions",
    [
        ("albert", {}, "AlbertModel", dict(vocab_size=30000, embedding_size=128, hidden_size=768,
         num_attention_heads=12, intermediate_size=3072), 12),
        ("albert", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
         intermediate_size=4096), "AlbertModel", dict(vocab_size=30000, embedding_size=128,
         hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
         18),
        ("roberta", {}, "RobertaModel", dict(vocab_size=50265, max_position_embeddings=514,
         type_vocab_size=1), 125),
        ("electra", dict(hidden_size=256, embedding_size=128, num_attention_heads=4,
         intermediate_size=1024), "ElectraForPreTraining", dict(embedding_size=128, hidden_size=256,
         num_attention_heads=4, intermediate_size=1024), 14),
        ("distilbert", {}, "DistilBertModel", {}, 66),
    ],
)  # fmt: skip
def test_parameter_counts_match_transformers(
    family, overrides, hf_class, hf_config, paper_millions
):
    """The bare encoders, and ELECTRA-Small as the paper counts it: the discriminator."""
    config = variant_config(family, **overrides)
    ours_cls = BertForReplacedTokenDetection if family == "electra" else BertModel
    ours = count(jax.eval_shape(ours_cls(config).init, jax.random.key(0), IDS[:, :4])["params"])
    model_cls = getattr(transformers, hf_class)
    config_cls = getattr(transformers, hf_class.split("For")[0].replace("Model", "") + "Config")
    with torch.device("meta"):  # shapes only
        theirs = sum(p.numel() for p in model_cls(config_cls(**hf_config)).parameters())
    assert ours == theirs
    assert round(ours / 1e6) == paper_millions


@pytest.mark.parametrize("share", ["all", "attention", "ffn"])
def test_shared_layers_equal_every_layer_holding_a_copy(share):
    shared_cfg = BertConfig(**TINY, share_layers=share)
    shared = random_params(BertForPreTraining(shared_cfg))
    copied = jax.tree.map(np.copy, shared)
    encoder = copied["bert"]["encoder"]
    halves = encoder.pop("shared")
    for i in range(TINY["num_hidden_layers"]):
        encoder[f"layer_{i}"] = {**encoder.get(f"layer_{i}", {}), **halves}
    plain_cfg = shared_cfg.replace(share_layers="none")
    plain = random_params(BertForPreTraining(plain_cfg))
    assert jax.tree.structure(copied) == jax.tree.structure(plain)
    assert count(plain) - count(shared) == (TINY["num_hidden_layers"] - 1) * count(halves)
    a = BertForPreTraining(shared_cfg).apply({"params": shared}, IDS, MASK, SEG, POSITIONS)
    b = BertForPreTraining(plain_cfg).apply({"params": copied}, IDS, MASK, SEG, POSITIONS)
    np.testing.assert_allclose(a.mlm_logits, b.mlm_logits, atol=1e-5)
    np.testing.assert_allclose(a.nsp_logits, b.nsp_logits, atol=1e-5)


SWITCHES = {
    "factorised-all-causal": dict(embedding_size=16, share_layers="all", causal=True),
    "attention-offset-no-types": dict(
        share_layers="attention", position_offset=2, type_vocab_size=0, pooler=False
    ),
    "ffn-factorised": dict(share_layers="ffn", embedding_size=16, type_vocab_size=1),
}


@pytest.mark.slow
@pytest.mark.parametrize("switches", list(SWITCHES.values()), ids=list(SWITCHES))
def test_layouts_agree_for_every_switch(switches):
    """Loss and gradients of the looped model = scanned + rematerialised, on the same weights."""
    config = BertConfig(**TINY, **switches)
    params = random_params(BertForPreTraining(config, use_nsp=config.pooler))

    def loss_and_grads(cfg, p):
        model = BertForPreTraining(cfg, use_nsp=cfg.pooler)

        def loss(p):
            out = model.apply({"params": p}, IDS, MASK, SEG, POSITIONS)
            nsp = jnp.sum(out.nsp_logits) if out.nsp_logits is not None else 0.0
            return jnp.sum(out.mlm_logits**2) * 1e-3 + nsp

        return jax.jit(jax.value_and_grad(loss))(p)

    ref_loss, ref_grads = loss_and_grads(config, params)
    scanned = config.replace(scan_layers=True, remat_policy="dots")
    value, grads = loss_and_grads(scanned, stack_layers(params))
    np.testing.assert_allclose(value, ref_loss, rtol=1e-5)
    grads = unstack_layers(grads)
    assert jax.tree.structure(grads) == jax.tree.structure(ref_grads)
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_position_offset_is_a_shifted_position_table():
    """RoBERTa's offset 2 = BERT reading the table from row 2, for every real token."""
    roberta = BertConfig(**TINY, position_offset=2)
    params = random_params(BertModel(roberta))
    bert = roberta.replace(position_offset=0, max_position_embeddings=18)
    shifted = jax.tree.map(np.copy, params)
    table = shifted["embeddings"]["position_embeddings"]
    table["embedding"] = table["embedding"][2:]
    a = BertModel(roberta).apply({"params": params}, IDS, MASK, SEG).sequence_output
    b = BertModel(bert).apply({"params": shifted}, IDS, MASK, SEG).sequence_output
    real = MASK.astype(bool)
    np.testing.assert_allclose(np.asarray(a)[real], np.asarray(b)[real], atol=1e-5)
    assert roberta.max_sequence_length == 18
    too_long = np.zeros((1, 19), np.int32)
    with pytest.raises(ValueError, match="19 > max_position_embeddings 20 - position_offset 2"):
        BertModel(roberta).apply({"params": params}, too_long)


def test_no_token_types_ignores_segment_ids():
    config = BertConfig(**TINY, type_vocab_size=0, pooler=False)
    params = random_params(BertModel(config))
    assert "token_type_embeddings" not in params["embeddings"] and "pooler" not in params
    a = BertModel(config).apply({"params": params}, IDS, MASK, SEG)
    b = BertModel(config).apply({"params": params}, IDS, MASK, 1 - SEG)
    assert a.pooled_output is None
    np.testing.assert_array_equal(a.sequence_output, b.sequence_output)


@pytest.mark.parametrize("causal", [False, True])
def test_without_pooler_the_classifier_reads_the_sentence_token(causal):
    """No pooler: [CLS]'s hidden state (causal: the last real token's) goes to the classifier."""
    config = BertConfig(**TINY, pooler=False, causal=causal)
    params = random_params(BertForSequenceClassification(config, num_labels=3))
    logits = BertForSequenceClassification(config, num_labels=3).apply(
        {"params": params}, IDS, MASK, SEG
    )
    seq = BertModel(config).apply({"params": params["bert"]}, IDS, MASK, SEG).sequence_output
    at = MASK.sum(-1) - 1 if causal else np.zeros(2, int)
    by_hand = np.asarray(seq)[np.arange(2), at] @ params["classifier"]["kernel"]
    np.testing.assert_allclose(logits, by_hand + params["classifier"]["bias"], atol=1e-5)
    with pytest.raises(BertJaxError, match="config.pooler is False"):
        BertForPreTraining(config).init(jax.random.key(0), IDS, MASK)


def test_causal_attention_sees_only_the_past():
    config = BertConfig(**TINY, causal=True, embedding_size=16, share_layers="attention")
    params = random_params(BertModel(config))
    changed = IDS.copy()
    changed[:, 5:] = (changed[:, 5:] + 7) % 117 + 3
    for attentions in (False, True):  # the fused kernel; probabilities written out
        a, b = (
            BertModel(config).apply({"params": params}, x, MASK, SEG, output_attentions=attentions)
            for x in (IDS, changed)
        )
        np.testing.assert_array_equal(a.sequence_output[:, :5], b.sequence_output[:, :5])
        assert np.abs(np.asarray(a.sequence_output[0, 5:] - b.sequence_output[0, 5:])).max() > 1e-3
    probs = np.asarray(a.attentions[0])
    assert probs.shape == (2, 4, 12, 12) and np.all(np.triu(probs, k=1) == 0)


def test_flops_count_the_embedding_projection():
    config = BertConfig(**TINY, embedding_size=16)
    proj = random_params(BertModel(config))["embeddings"]["projection"]["kernel"]
    plain = config.replace(embedding_size=None)
    assert proj.shape == (16, 32)
    extra = encoder_flops_per_token(config, 12) - encoder_flops_per_token(plain, 12)
    assert extra == 6 * proj.size
    # The MLM head: 32 -> 16 transform and a 16-wide decoder instead of 32 -> 32 and 32-wide.
    head = pretraining_flops_per_step(config, 1, 12, 1, False) - 12 * encoder_flops_per_token(
        config, 12
    )
    assert head == 6 * (32 * 16 + 16 * 120)


@pytest.mark.slow
def test_sharded_train_step_matches_one_device():
    """Factorised embeddings + shared attention, scanned with remat, on a 2x2x2 mesh with the
    default logical rules: same losses as one device; shared weights sharded like per-layer ones,
    the factorised width replicated."""
    bert = variant_config("albert", **TINY, embedding_size=16, share_layers="attention",
                         scan_layers=True, remat_policy="dots")  # fmt: skip
    task = PretrainingTask(bert, 8, 12, 3)
    config = ml_collections.ConfigDict(dict(
        optimizer="adamw", learning_rate=1e-3, train_steps=10, warmup_steps=2, seed=0,
        log_every_steps=1, checkpoint_every_steps=100, async_checkpoints=False,
        mesh=dict(data=1, fsdp=1, tensor=1),
    ))  # fmt: skip
    losses, states = {}, {}
    for shape in ((1, 1, 1), (2, 2, 2)):
        sizes = ml_collections.ConfigDict(dict(data=shape[0], fsdp=shape[1], tensor=shape[2]))
        mesh = make_mesh(sizes, jax.devices()[: int(np.prod(shape))])
        trainer = build_trainer(config, task, mesh)
        state, losses[shape] = trainer.init_state(), []
        for seed in range(2):
            state, metrics = trainer.train_step(state, synthetic_batch(task, seed))
            losses[shape].append(float(metrics["loss"]))
        states[shape] = state
    np.testing.assert_allclose(losses[(2, 2, 2)], losses[(1, 1, 1)], rtol=2e-5)
    params = states[(2, 2, 2)].params["bert"]
    assert params["encoder"]["shared"]["attention"]["query"]["kernel"].sharding.spec == jax.P(
        "fsdp", "tensor", None
    )
    assert params["encoder"]["layers"]["intermediate"]["kernel"].sharding.spec == jax.P(
        None, "fsdp", "tensor"
    )
    word_embeddings = params["embeddings"]["word_embeddings"]["embedding"]
    assert word_embeddings.sharding.spec == jax.P("tensor", None)
