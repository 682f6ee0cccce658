"""ELECTRA pretraining through the one task and loop: the generator (1/4 the width) and the
discriminator share their embeddings and train in one jitted step; the masks are 85% [MASK] /
15% kept; no gradient flows through the sampling; FLOPs count both networks; the trained
discriminator and generator export as transformers' ElectraForPreTraining / ElectraForMaskedLM
with the same outputs, and the discriminator is what fine-tuning loads."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.core import meta

from bert_jax import objectives
from bert_jax.arch.bert import flops as flops_lib
from bert_jax.arch.electra.model import generator_config
from bert_jax.config import BertConfig, preset
from bert_jax.corpus import snapshot
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.errors import BertJaxError
from bert_jax.objectives.masking import MaskingSpec, mask_batch
from bert_jax.pretraining.task import PretrainingTask, bert_config_from, synthetic_batch
from bert_jax.train.config import pretrain_config

SEQ, PRED = 64, 10


def _electra(**kw) -> BertConfig:
    base = dict(vocab_size=300, max_position_embeddings=64, family="electra", pooler=False)
    return preset("L2-H128", **{**base, **kw})


def test_generator_is_a_quarter_of_the_discriminator_reading_its_tables():
    base = preset("base", family="electra", pooler=False)  # ELECTRA-base: E = H = 768
    gen = generator_config(base)
    assert (gen.hidden_size, gen.num_attention_heads, gen.intermediate_size) == (192, 3, 768)
    assert gen.num_hidden_layers == 12 and gen.embedding_size == 768  # projection 768 -> 192
    small = preset("L12-H256-A4", family="electra", pooler=False, embedding_size=128)
    gen_small = generator_config(small)
    assert gen_small.embedding_size == 128 and gen_small.hidden_size == 64

    task = PretrainingTask(_electra(embedding_size=64), 4, 32, 5, objective="electra")
    shapes = jax.eval_shape(
        lambda: task.model.init(
            {"params": jax.random.PRNGKey(0)},
            **task.model_inputs(synthetic_batch(task, 0)),
        )
    )["params"]
    assert set(shapes) == {"bert", "discriminator", "generator"}
    # One set of tables: the generator has only its projection E -> H_g, encoder and head.
    assert set(shapes["generator"]) == {"projection", "encoder", "predictions"}
    assert shapes["generator"]["projection"]["kernel"].value.shape == (64, 32)
    assert shapes["bert"]["embeddings"]["word_embeddings"]["embedding"].value.shape == (300, 64)


def test_flops_count_both_networks():
    disc, b, n, p = _electra(), 8, 64, 10
    got = PretrainingTask(disc, b, n, p, objective="electra").flops_per_step(b)
    d = disc.hidden_size
    discriminator = b * n * (flops_lib.encoder_flops_per_token(disc, n) + 6 * (d * d + d))
    generator = flops_lib.pretraining_flops_per_step(generator_config(disc), b, n, p, False)
    assert got == pytest.approx(discriminator + generator)
    # The generator is not free: a quarter-width generator adds more than 5% here.
    assert generator > 0.05 * discriminator


def test_masks_are_85_percent_mask_15_percent_kept_no_random(uncased_vocab):
    rule = objectives.get("electra").masking
    spec = MaskingSpec.from_vocab_file(str(uncased_vocab), rule=rule)
    rs = np.random.RandomState(0)
    ids = rs.randint(1000, 30000, size=(400, 128))
    ids[:, 0] = 101
    out = mask_batch(ids, np.ones_like(ids), np.arange(400), spec, 20, seed=1)
    n_mask, n_random, n_kept = out["mask_kinds"]
    total = n_mask + n_random + n_kept
    assert n_random == 0 and total == 400 * 19
    assert abs(n_mask / total - 0.85) < 0.02


@pytest.mark.slow
def test_no_gradient_through_sampling_and_the_loss_terms():
    task = PretrainingTask(_electra(), 8, 32, 5, objective="electra")
    batch = {k: jnp.asarray(v) for k, v in synthetic_batch(task, 1).items()}
    key = jax.random.PRNGKey(2)

    @jax.jit
    def grads():
        params = meta.unbox(
            task.model.init({"params": jax.random.PRNGKey(0)}, **task.model_inputs(batch))
        )["params"]

        def term(name):
            return lambda p: task.loss_fn(p, batch, key, True)[1][name]

        g_disc = jax.grad(term("replaced_token_loss"))(params)
        g_gen = jax.grad(term("masked_lm_loss"))(params)
        return g_disc, g_gen, task.loss_fn(params, batch, key, True)

    g_disc, g_gen, (loss, m) = grads()
    # The discriminator's loss reaches the generator only through the shared tables.
    assert float(optax.tree.norm(g_disc["generator"])) == 0.0
    assert float(optax.tree.norm(g_disc["bert"]["embeddings"]["word_embeddings"])) > 0
    assert float(optax.tree.norm(g_gen["discriminator"])) == 0.0
    assert float(optax.tree.norm(g_gen["bert"]["embeddings"]["word_embeddings"])) > 0
    np.testing.assert_allclose(
        loss, m["masked_lm_loss"] + 50.0 * m["replaced_token_loss"], rtol=1e-6
    )
    # Every masked position of this batch was sampled; the labels are where samples differ.
    assert 0.0 < float(m["replaced_token_fraction"]) <= 5 / 32 + 1e-6
    assert 0.0 <= float(m["replaced_token_auc"]) <= 1.0


def test_rank_auc_is_sklearns_roc_auc_over_the_real_tokens():
    from sklearn.metrics import roc_auc_score

    from bert_jax.objectives.losses import rank_auc

    rs = np.random.RandomState(0)
    scores = rs.randn(2048).astype(np.float32)
    for tied in (scores, np.round(scores)):  # ties count half, as sklearn's
        labels = (rs.rand(2048) < 0.1 + 0.2 * (tied > 0)).astype(np.float32)
        real = rs.rand(2048) < 0.8  # padding is left out, not ranked
        weights = jnp.asarray(real, jnp.float32)
        got = float(rank_auc(jnp.asarray(tied), jnp.asarray(labels), weights))
        assert got == pytest.approx(roc_auc_score(labels[real], tied[real]), abs=1e-6)
        assert abs(got - 0.5) > 0.05  # the scores do rank the labels here
    assert float(rank_auc(jnp.ones(8), jnp.zeros(8), jnp.ones(8))) == 0.5  # no positive


def test_family_and_objective_go_together():
    c = pretrain_config("tiny")
    c.objective = "electra"
    with pytest.raises(BertJaxError, match="go together"):
        bert_config_from(c)
    c.family = "electra"
    cfg = bert_config_from(c)
    assert cfg.family == "electra" and not cfg.pooler


# ---- end to end: real text, the one loop, export, transformers, fine-tuning ---------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from bert_jax.runs.pretrain import run_pretraining
    from bert_jax.tokenization.vocab_builder import build_vocab

    root = tmp_path_factory.mktemp("electra")
    snapshot.write_corpus(root / "corpus.txt", max_bytes=400_000)  # fixed text: see its module
    docs = (root / "corpus.txt").read_text().strip().split("\n\n")
    n_eval = len(docs) // 8
    (root / "train.txt").write_text("\n\n".join(docs[:-n_eval]) + "\n")
    (root / "eval.txt").write_text("\n\n".join(docs[-n_eval:]) + "\n")
    build_vocab(str(root / "train.txt"), 2000, root, num_threads=1)
    vocab = str(root / "vocab.txt")
    kw = dict(max_seq_length=SEQ, max_predictions_per_seq=PRED, objective="electra")
    for split, dupes in (("train", 3), ("eval", 1)):
        create_pretraining_data(str(root / f"{split}.txt"), str(root / split), vocab,
                                dupe_factor=dupes, **kw)  # fmt: skip
    data = {"train": str(root / "train" / "*.tfrecord"), "eval": str(root / "eval" / "*.tfrecord")}
    c = pretrain_config("tiny")
    c.update(dict(
        family="electra", objective="electra", dtype="float32", train_files=data["train"],
        eval_files=data["eval"], vocab_file=vocab, max_seq_length=SEQ, max_predictions_per_seq=PRED,
        global_batch_size=32, learning_rate=STEPS_LR[1], schedule="constant", warmup_steps=0,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, log_every_steps=50,
        max_eval_steps=20, train_steps=STEPS_LR[0], eval_every_steps=STEPS_LR[0],
        checkpoint_every_steps=STEPS_LR[0], export_hf_dir=str(root / "hf"),
    ))  # fmt: skip
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 1, 1
    result = run_pretraining(c, str(root / "workdir"))
    return root, data, result


STEPS_LR = (300, 2e-3)


def _context_free_baselines(root, data) -> dict[str, float]:
    """Held-out accuracy of predicting the most frequent training target (`unigram`), and of
    that at [MASK] while copying the shown token elsewhere (`unigram_or_copy`)."""
    from bert_jax.input import EvalInput
    from bert_jax.objectives.baselines import masked_lm_baselines

    mask_id = (root / "vocab.txt").read_text().split("\n").index("[MASK]")
    train, held_out = (
        EvalInput(data[s], 64, SEQ, PRED, objective="electra") for s in ("train", "eval")
    )
    return masked_lm_baselines(train, held_out, mask_id)


@pytest.mark.slow
def test_electra_learns_on_real_text(run):
    root, data, result = run
    ev = result.last_eval
    bars = _context_free_baselines(root, data)
    unigram = bars["unigram"]
    f = ev["eval_replaced_token_fraction"]
    constant_loss = -(f * np.log(f) + (1 - f) * np.log(1 - f))  # the best constant prediction
    print(f"generator accuracy {ev['eval_masked_lm_accuracy']:.4f} (unigram {unigram:.4f}, "
          f"context-free {bars['unigram_or_copy']:.4f}); "
          f"discriminator accuracy {ev['eval_replaced_token_accuracy']:.4f} (all-original "
          f"{ev['eval_replaced_token_baseline']:.4f}), loss {ev['eval_replaced_token_loss']:.4f} "
          f"(constant {constant_loss:.4f})")  # fmt: skip
    # Measured on the corpus snapshot at seeds 0, 1, 2 (`seed` in the config; 0 is the test's):
    #   generator accuracy 0.110, 0.119, 0.140 against unigram 0.043 (2.5x-3.2x) and context-free
    #   0.180; discriminator loss minus the best constant's 0.4075-0.4134 = -0.006, 0.4157-0.4141
    #   = +0.002, 0.4023-0.4084 = -0.006; its accuracy equals the all-original rate in all three.
    # The generator beats the unigram rate, not yet the context-free bar (at 85/15/0 a sixth of
    # its targets are shown, and 300 steps have not taught it to copy them): it learns, which is
    # not to say it uses context.
    assert ev["eval_masked_lm_accuracy"] > 2 * unigram
    assert 0.05 < f < 0.2  # ~15% of the tokens are chosen, nearly all are replaced this early
    # At this size and budget the discriminator learns the replaced-token rate, not yet which
    # tokens were replaced: beating the best constant prediction is within seed noise (seed 1
    # does not; at 600 steps seed 0 is still only 0.0015 below it, seed 1 0.0004 above), so that
    # is not asserted. What holds is that its loss is at most the constant's (+0.01 for seed
    # noise), calibrated to the ~15% rate (an untrained head scores ln 2 = 0.69; a head fed wrong
    # labels, or none, could not get there), and that it answers "original" as often as it should.
    assert ev["eval_replaced_token_loss"] < constant_loss + 0.01
    assert ev["eval_replaced_token_accuracy"] >= ev["eval_replaced_token_baseline"] - 1e-3
    assert result.last_metrics["mfu"] > 0
    # The detector that sees each token alone: its generator over-samples some tokens and never
    # samples others, so which token stands there says something (labels misaligned with the
    # tokens would leave it at AUC 0.5, and its loss at the constant's).
    from bert_jax.ablations.token_alone import token_alone_bars

    bars = token_alone_bars(result.trainer.task, result.trainer, result.state.params)
    print(f"token alone: AUC {bars['token_alone_auc']:.4f}, loss {bars['token_alone_loss']:.4f}; "
          f"discriminator AUC {ev['eval_replaced_token_auc']:.4f}")
    assert 0.6 < bars["token_alone_auc"] < 1.0 and bars["token_alone_loss"] < constant_loss
    assert 0.0 < ev["eval_replaced_token_auc"] < 1.0


@pytest.mark.slow
def test_exports_match_transformers_and_fine_tuning_loads_the_discriminator(run):
    import torch
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    from bert_jax.arch.bert.heads import (
        BertForPreTraining,
        BertForReplacedTokenDetection,
        BertForSequenceClassification,
    )
    from bert_jax.arch.bert.pretrained import graft_encoder, load_pretrained
    from bert_jax.arch.electra.model import discriminator_params, generator_params
    from bert_jax.input import EvalInput

    root, data, result = run
    params = jax.device_get(result.state.params)
    disc_cfg = result.trainer.task.bert_config
    batch = next(iter(EvalInput(data["eval"], 4, SEQ, PRED, objective="electra")))
    ids, mask, seg = (np.asarray(batch[k], np.int64) for k in
                      ("input_ids", "input_mask", "segment_ids"))  # fmt: skip
    t = {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask),
         "token_type_ids": torch.tensor(seg)}  # fmt: skip

    disc_hf = ElectraForPreTraining.from_pretrained(root / "hf").eval()
    ours, _ = BertForReplacedTokenDetection(disc_cfg).apply(
        {"params": discriminator_params(params)}, ids, mask, seg
    )
    with torch.no_grad():
        theirs = disc_hf(**t).logits.numpy()
    real = mask > 0
    assert np.abs(np.asarray(ours)[real] - theirs[real]).max() < 1e-5

    gen_cfg = generator_config(disc_cfg)
    gen_hf = ElectraForMaskedLM.from_pretrained(root / "hf" / "generator").eval()
    assert gen_hf.config.hidden_size == disc_cfg.hidden_size // 4
    out = BertForPreTraining(gen_cfg, use_nsp=False).apply(
        {"params": generator_params(params)}, ids, mask, seg
    )
    with torch.no_grad():
        theirs = gen_hf(**t).logits.numpy()
    assert np.abs(np.asarray(out.mlm_logits)[real] - theirs[real]).max() < 1e-4
    # The generator's exported tables are the discriminator's (shared in training).
    np.testing.assert_array_equal(
        gen_hf.electra.embeddings.word_embeddings.weight.detach().numpy(),
        disc_hf.electra.embeddings.word_embeddings.weight.detach().numpy(),
    )

    # Fine-tuning: the export and the workdir both load as the discriminator.
    for source in (root / "hf", root / "workdir"):
        pre = load_pretrained(source)
        assert pre.config.family == "electra" and "rtd" in pre.heads
        model = BertForSequenceClassification(pre.config, num_labels=2)
        fresh = model.init(jax.random.PRNGKey(0), ids[:1])["params"]
        grafted = meta.unbox(graft_encoder(fresh, pre.params))
        np.testing.assert_allclose(
            grafted["bert"]["encoder"]["layer_1"]["output"]["kernel"],
            params["bert"]["encoder"]["layer_1"]["output"]["kernel"], rtol=0, atol=1e-6,
        )  # fmt: skip
