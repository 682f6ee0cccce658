"""The BERT family against transformers (PyTorch) on identical random weights: Hugging Face
directories of RoBERTa, ALBERT, ELECTRA (discriminator and generator), DistilBERT and a causal
(decoder) BERT load into the one encoder with the family's switches, and give transformers'
hidden states (every layer), attention maps and head logits within 1e-5 in float32, looped and
scanned. Exported back, each loads into the same transformers class with no missing or unexpected
keys and gives the original model's numbers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest
import torch
import transformers
from flax.core import meta

from bert_jax.arch.bert.heads import BertForPreTraining, BertForReplacedTokenDetection
from bert_jax.arch.bert.hf import export_hf
from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.model.scan import stack_layers

ATOL = 1e-5
SIZE = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=40)  # fmt: skip
EAGER = dict(attn_implementation="eager")  # attention maps are returned


@dataclasses.dataclass(frozen=True)
class Case:
    hf_class: str
    hf_config: Callable[[], transformers.PretrainedConfig]
    switches: dict[str, Any]  # what our config must say after loading
    heads: tuple[str, ...]
    pad_id: int = 0
    segments: bool = True  # the family has token types


CASES = {
    "roberta": Case(
        "RobertaForMaskedLM",
        lambda: transformers.RobertaConfig(**SIZE, **EAGER, type_vocab_size=1, layer_norm_eps=1e-5),
        dict(family="roberta", position_offset=2, type_vocab_size=1, layer_norm_eps=1e-5),
        ("mlm",),
        pad_id=1,
    ),
    "albert": Case(
        "AlbertForPreTraining",
        lambda: transformers.AlbertConfig(**SIZE, **EAGER, embedding_size=16),
        dict(family="albert", embedding_size=16, share_layers="all", hidden_act="gelu_new"),
        ("pooler", "mlm", "nsp"),
    ),
    "electra": Case(
        "ElectraForPreTraining",
        lambda: transformers.ElectraConfig(**SIZE, **EAGER, embedding_size=16),
        dict(family="electra", embedding_size=16, pooler=False),
        ("rtd",),
    ),
    "electra_generator": Case(
        "ElectraForMaskedLM",
        lambda: transformers.ElectraConfig(**SIZE, **EAGER, embedding_size=16),
        dict(family="electra", embedding_size=16, pooler=False),
        ("mlm",),
    ),
    "distilbert": Case(
        "DistilBertForMaskedLM",
        lambda: transformers.DistilBertConfig(
            vocab_size=99,
            dim=32,
            n_layers=2,
            n_heads=4,
            hidden_dim=37,
            max_position_embeddings=40,
            **EAGER,
        ),
        dict(family="distilbert", type_vocab_size=0, pooler=False),
        ("mlm",),
        segments=False,
    ),
    "bert_causal": Case(
        "BertLMHeadModel",
        lambda: transformers.BertConfig(**SIZE, **EAGER, is_decoder=True),
        dict(family="bert", causal=True),
        ("mlm",),
    ),
}


def inputs(case: Case, seed: int = 0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(3, 99, (2, 16))
    mask = np.ones_like(ids)
    mask[1, 11:] = 0
    ids[mask == 0] = case.pad_id  # RoBERTa derives its position ids from the padding
    seg = np.zeros_like(ids)
    if case.segments and case.switches.get("family") != "roberta":
        seg[:, 8:] = 1
    positions = np.array([[1, 4, 9, 15], [0, 3, 7, 10]])
    return ids, mask, seg, positions


def torch_forward(model, case: Case, ids, mask, seg):
    kwargs = dict(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))
    if case.segments:
        kwargs["token_type_ids"] = torch.tensor(seg)
    with torch.no_grad():
        return model(**kwargs, output_hidden_states=True, output_attentions=True)


def torch_logits(case: Case, out) -> dict[str, np.ndarray]:
    if "rtd" in case.heads:
        return {"rtd": out.logits.numpy()}
    logits = {"mlm": getattr(out, "prediction_logits", None)}
    if logits["mlm"] is None:
        logits["mlm"] = out.logits
    if "nsp" in case.heads:
        logits["nsp"] = out.sop_logits
    return {k: v.numpy() for k, v in logits.items()}


def our_forward(pre, case: Case, ids, mask, seg, positions, scan_layers: bool):
    config = pre.config.replace(scan_layers=scan_layers)
    params = stack_layers(pre.params) if scan_layers else pre.params
    # Looped: the fused attention kernel; scanned: probabilities written out (attention maps).
    flags = dict(output_hidden_states=True, output_attentions=scan_layers)
    if "rtd" in case.heads:
        rtd, out = BertForReplacedTokenDetection(config).apply(
            {"params": params}, ids, mask, seg, **flags
        )
        return out, {"rtd": rtd}
    pt = BertForPreTraining(config, use_nsp="nsp" in case.heads).apply(
        {"params": params}, ids, mask, seg, positions, **flags
    )
    logits = {"mlm": pt.mlm_logits}
    if pt.nsp_logits is not None:
        logits["nsp"] = pt.nsp_logits
    return pt.encoder, logits


def max_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))


@pytest.fixture(scope="module", params=list(CASES))
def saved(request, tmp_path_factory):
    """(case, transformers model, its save_pretrained directory): random weights, every one
    perturbed so that biases and LayerNorms are not trivially 0 or 1."""
    case = CASES[request.param]
    torch.manual_seed(0)
    model = getattr(transformers, case.hf_class)(case.hf_config()).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    path = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(path)
    return case, model, path


@pytest.fixture(scope="module")
def loaded(saved):
    return load_pretrained(saved[2])


def test_config_and_heads_come_from_the_directory(saved, loaded):
    case, _, _ = saved
    for field, value in case.switches.items():
        assert getattr(loaded.config, field) == value, field
    assert loaded.heads == case.heads and loaded.ignored == ()


@pytest.mark.parametrize("scan_layers", [False, True])
def test_family_matches_transformers(saved, loaded, scan_layers):
    case, model, _ = saved
    ids, mask, seg, positions = inputs(case)
    ours, our_logits = our_forward(loaded, case, ids, mask, seg, positions, scan_layers)
    theirs = torch_forward(model, case, ids, mask, seg)
    hidden = [max_diff(a, b) for a, b in zip(ours.hidden_states, theirs.hidden_states, strict=True)]
    assert len(hidden) == 3 and max(hidden) <= ATOL, hidden
    if scan_layers:
        probs = [max_diff(a, b) for a, b in zip(ours.attentions, theirs.attentions, strict=True)]
        assert len(probs) == 2 and max(probs) <= ATOL, probs
    their_logits = torch_logits(case, theirs)
    if "mlm" in their_logits:  # ours are gathered at the masked positions
        their_logits["mlm"] = np.take_along_axis(their_logits["mlm"], positions[..., None], 1)
    assert set(our_logits) == set(their_logits)
    diffs = {head: max_diff(logits, their_logits[head]) for head, logits in our_logits.items()}
    print(f"{case.hf_class} scan={scan_layers}: hidden {max(hidden):.1e}, logits {diffs}")
    for head, logits in our_logits.items():
        assert logits.shape == their_logits[head].shape, head
    assert max(diffs.values()) <= ATOL, diffs


def test_params_are_exactly_the_models_tree(saved, loaded):
    """Every parameter of our model has a Hugging Face name, and nothing else is loaded."""
    case, _, _ = saved
    ids, mask, seg, positions = inputs(case)
    if "rtd" in case.heads:
        model = BertForReplacedTokenDetection(loaded.config)
    else:
        model = BertForPreTraining(loaded.config, use_nsp="nsp" in case.heads)
    abstract = meta.unbox(jax.eval_shape(model.init, jax.random.key(0), ids, mask, seg))
    want = jax.tree.map(lambda x: x.shape, abstract["params"])
    assert jax.tree.map(lambda x: x.shape, loaded.params) == want


def test_export_loads_in_transformers_with_the_same_outputs(saved, loaded, tmp_path):
    case, model, _ = saved
    export_hf(loaded.config, stack_layers(loaded.params), tmp_path)
    again, info = getattr(transformers, case.hf_class).from_pretrained(
        tmp_path, output_loading_info=True, attn_implementation="eager"
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids, mask, seg, _ = inputs(case, seed=1)
    before, after = (torch_forward(m.eval(), case, ids, mask, seg) for m in (model, again))
    for a, b in zip(before.hidden_states, after.hidden_states, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for head, logits in torch_logits(case, after).items():
        np.testing.assert_array_equal(logits, torch_logits(case, before)[head])
    reloaded = load_pretrained(tmp_path)
    assert reloaded.config == loaded.config and reloaded.heads == loaded.heads
    for a, b in zip(jax.tree.leaves(reloaded.params), jax.tree.leaves(loaded.params), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("saved", ["bert_causal"], indirect=True)
def test_causal_outputs_ignore_later_tokens(saved, loaded):
    """Left-to-right: changing the tokens after position 6 changes nothing before it (and does
    change the outputs after it), in ours and in transformers' decoder alike."""
    case, model, _ = saved
    ids, mask, seg, positions = inputs(case)
    changed = ids.copy()
    changed[:, 7:] = (changed[:, 7:] + 5) % 99
    for scan_layers in (False, True):
        a, _ = our_forward(loaded, case, ids, mask, seg, positions, scan_layers)
        b, _ = our_forward(loaded, case, changed, mask, seg, positions, scan_layers)
        assert max_diff(a.sequence_output[:, :7], b.sequence_output[:, :7]) == 0.0
        assert max_diff(a.sequence_output[0, 7:], b.sequence_output[0, 7:]) > 1e-2
    theirs = torch_forward(model, case, changed, mask, seg).hidden_states[-1].numpy()
    assert max_diff(b.sequence_output, theirs) <= ATOL
