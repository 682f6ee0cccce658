"""The family recipe configs (bert_jax/configs/{electra,albert,distilbert}.py) build the models
their docstrings name, with the papers' parameter counts (counted from the initialised trees,
without materialising them)."""

from __future__ import annotations

import math

import jax
import pytest

from bert_jax.arch.electra.model import generator_config
from bert_jax.configs import albert, distilbert, electra
from bert_jax.pretraining.task import bert_config_from, pretraining_task


def _param_count(config) -> tuple[int, dict]:
    c = config.copy_and_resolve_references()
    c.global_batch_size, c.dynamic_masking = 2, False  # shapes only: no vocab file here
    task = pretraining_task(c, bert_config_from(c))
    inputs = {k: jax.ShapeDtypeStruct((2,) + s.shape[1:], s.dtype)
              for k, s in task.init_inputs().items()}  # fmt: skip
    shapes = jax.eval_shape(
        lambda x: task.model.init(jax.random.PRNGKey(0), **task.model_inputs(x)), inputs
    )["params"]
    sizes = {k: sum(math.prod(x.value.shape) for x in jax.tree.leaves(
        v, is_leaf=lambda x: hasattr(x, "value"))) for k, v in shapes.items()}  # fmt: skip
    return sum(sizes.values()), sizes


@pytest.mark.parametrize("preset,millions", [("base", 12), ("large", 18)])
def test_albert_sizes_match_the_paper(preset, millions):
    c = albert.get_config(preset)
    c.vocab_size = 30000
    total, sizes = _param_count(c)
    assert c.optimizer == "lamb" and c.objective == "mlm_sop"
    # The paper's counts are the encoder (embeddings + shared layer): 11.7M and 17.7M.
    encoder = sizes["bert"]
    assert abs(encoder / 1e6 - millions) < 0.5, encoder


def test_electra_small_is_14m_with_a_quarter_width_generator():
    c = electra.get_config("small")
    total, sizes = _param_count(c)
    # ELECTRA-Small: 14M parameters (discriminator); the generator adds its own layers.
    assert abs((sizes["bert"] + sizes["discriminator"]) / 1e6 - 13.5) < 0.6, sizes
    gen = generator_config(bert_config_from(c), c.generator_size)
    assert (gen.hidden_size, gen.num_attention_heads, gen.intermediate_size) == (64, 1, 256)
    assert sizes["generator"] < 0.2 * sizes["bert"]


def test_distilbert_recipe_needs_a_teacher():
    c = distilbert.get_config("cpu")
    assert c.teacher == "" and c.objective == "full_sentences"
    assert distilbert.get_config("base").global_batch_size == 4096


def test_hidden_act_reaches_every_encoder_or_is_refused():
    # config.hidden_act (unset: the family's GELU) picks the tanh form for BERT and ModernBERT;
    # XLNet's pretraining keeps its exact gelu and says so
    from bert_jax.arch.modernbert.pretraining import config_from_bert as modernbert_config
    from bert_jax.arch.xlnet.pretraining import config_from_bert as xlnet_config
    from bert_jax.errors import BertJaxError
    from bert_jax.train.config import pretrain_config

    c = pretrain_config("tiny")
    assert bert_config_from(c).hidden_act == "gelu"
    assert bert_config_from(albert.get_config("base")).hidden_act == "gelu_new"  # the family's
    c.hidden_act = "gelu_new"
    bert = bert_config_from(c)
    assert bert.hidden_act == "gelu_new"
    assert modernbert_config(bert).hidden_activation == "gelu_new"
    with pytest.raises(BertJaxError, match="XLNet's feed-forward"):
        xlnet_config(bert)
    c.hidden_act = "swish"
    with pytest.raises(BertJaxError, match="hidden_act 'swish' unsupported"):
        bert_config_from(c)
