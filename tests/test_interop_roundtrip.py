"""Checkpoints out and back in: our params -> Hugging Face dir -> transformers gives our numbers
(loading with no missing or unexpected keys); a TF checkpoint written here with the reference's
variable names -> our loader gives transformers' numbers; grafting into task models."""

from __future__ import annotations

import json
import subprocess
import sys

import jax
import numpy as np
import pytest
import torch
import transformers
from flax.core import meta

from bert_jax.arch.bert.heads import BertForPreTraining, BertForSequenceClassification
from bert_jax.arch.bert.hf import export_hf
from bert_jax.arch.bert.model import BertModel
from bert_jax.arch.bert.pretrained import graft_encoder, load_pretrained
from bert_jax.config import BertConfig
from bert_jax.model.scan import stack_layers

ATOL = 1e-5  # float32 vs PyTorch: measured max differences 1e-6 .. 6e-6 (README)
CONFIG = BertConfig(
    vocab_size=1000, hidden_size=96, num_hidden_layers=3, num_attention_heads=4,
    intermediate_size=200, max_position_embeddings=64,
)  # fmt: skip


def inputs(seed=0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(5, 1000, (2, 16))
    mask = np.ones_like(ids)
    mask[0, 11:] = 0
    seg = np.zeros_like(ids)
    seg[:, 9:] = 1
    return ids, mask, seg


def max_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))


def random_params(model, seed, *args):
    """Random values in the exact (boxed) structure `model.init` gives, without compiling the
    initialiser: every weight, biases and LayerNorms included, is random so each one matters."""
    rng = np.random.RandomState(seed)
    abstract = jax.eval_shape(model.init, jax.random.key(0), *args)
    return jax.tree.map(lambda x: rng.normal(0, 0.1, x.shape).astype(np.float32), abstract)


@pytest.fixture(scope="module")
def ours():
    ids, mask, seg = inputs()
    return meta.unbox(random_params(BertForPreTraining(CONFIG), 1, ids, mask, seg))["params"]


def test_export_loads_in_transformers_with_same_outputs(ours, tmp_path, uncased_vocab):
    ids, mask, seg = inputs()
    mine = BertForPreTraining(CONFIG).apply({"params": ours}, ids, mask, seg)
    export_hf(CONFIG, ours, tmp_path, vocab_file=uncased_vocab, do_lower_case=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"
    ]  # fmt: skip
    model, info = transformers.BertForPreTraining.from_pretrained(
        tmp_path, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    _, info = transformers.BertModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"], info
    with torch.no_grad():
        theirs = model.eval()(
            input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
            token_type_ids=torch.tensor(seg), output_hidden_states=True,
        )  # fmt: skip
    assert max_diff(mine.encoder.sequence_output, theirs.hidden_states[-1].numpy()) <= ATOL
    assert max_diff(mine.mlm_logits, theirs.prediction_logits.numpy()) <= ATOL
    assert max_diff(mine.nsp_logits, theirs.seq_relationship_logits.numpy()) <= ATOL
    # ...and back: the exported directory reloads to the same arrays.
    again = load_pretrained(tmp_path)
    assert again.do_lower_case is True and again.vocab_file == tmp_path / "vocab.txt"
    for a, b in zip(jax.tree.leaves(again.params), jax.tree.leaves(ours), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_export_scanned_encoder_only_is_a_bare_bertmodel(ours, tmp_path):
    bert_only = stack_layers({"bert": ours["bert"]})
    export_hf(CONFIG, bert_only, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["BertModel"]
    model, info = transformers.BertModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids, mask, seg = inputs(3)
    mine = BertModel(CONFIG).apply({"params": ours["bert"]}, ids, mask, seg)
    with torch.no_grad():
        theirs = model.eval()(torch.tensor(ids), torch.tensor(mask), torch.tensor(seg))
    assert max_diff(mine.pooled_output, theirs.pooler_output.numpy()) <= ATOL


def reference_tf_variables(state: dict) -> dict[str, np.ndarray]:
    """The reference's TF variable names and layouts (bert_reference.md §4.4), written out here
    independently of bert_jax.interop, from a transformers state dict."""
    out = {}

    def t(name):
        return state[name].numpy().T

    def v(name):
        return state[name].numpy()

    for e in ("word", "token_type", "position"):
        out[f"bert/embeddings/{e}_embeddings"] = v(f"bert.embeddings.{e}_embeddings.weight")
    out["bert/embeddings/LayerNorm/gamma"] = v("bert.embeddings.LayerNorm.weight")
    out["bert/embeddings/LayerNorm/beta"] = v("bert.embeddings.LayerNorm.bias")
    for i in range(CONFIG.num_hidden_layers):
        tf, pt = f"bert/encoder/layer_{i}", f"bert.encoder.layer.{i}"
        for qkv in ("query", "key", "value"):
            out[f"{tf}/attention/self/{qkv}/kernel"] = t(f"{pt}.attention.self.{qkv}.weight")
            out[f"{tf}/attention/self/{qkv}/bias"] = v(f"{pt}.attention.self.{qkv}.bias")
        out[f"{tf}/attention/output/dense/kernel"] = t(f"{pt}.attention.output.dense.weight")
        out[f"{tf}/attention/output/dense/bias"] = v(f"{pt}.attention.output.dense.bias")
        out[f"{tf}/attention/output/LayerNorm/gamma"] = v(f"{pt}.attention.output.LayerNorm.weight")
        out[f"{tf}/attention/output/LayerNorm/beta"] = v(f"{pt}.attention.output.LayerNorm.bias")
        out[f"{tf}/intermediate/dense/kernel"] = t(f"{pt}.intermediate.dense.weight")
        out[f"{tf}/intermediate/dense/bias"] = v(f"{pt}.intermediate.dense.bias")
        out[f"{tf}/output/dense/kernel"] = t(f"{pt}.output.dense.weight")
        out[f"{tf}/output/dense/bias"] = v(f"{pt}.output.dense.bias")
        out[f"{tf}/output/LayerNorm/gamma"] = v(f"{pt}.output.LayerNorm.weight")
        out[f"{tf}/output/LayerNorm/beta"] = v(f"{pt}.output.LayerNorm.bias")
    out["bert/pooler/dense/kernel"] = t("bert.pooler.dense.weight")
    out["bert/pooler/dense/bias"] = v("bert.pooler.dense.bias")
    out["cls/predictions/transform/dense/kernel"] = t("cls.predictions.transform.dense.weight")
    out["cls/predictions/transform/dense/bias"] = v("cls.predictions.transform.dense.bias")
    out["cls/predictions/transform/LayerNorm/gamma"] = v(
        "cls.predictions.transform.LayerNorm.weight"
    )
    out["cls/predictions/transform/LayerNorm/beta"] = v("cls.predictions.transform.LayerNorm.bias")
    out["cls/predictions/output_bias"] = v("cls.predictions.bias")
    out["cls/seq_relationship/output_weights"] = v("cls.seq_relationship.weight")  # [2, H]
    out["cls/seq_relationship/output_bias"] = v("cls.seq_relationship.bias")
    return out


def test_tf_checkpoint_with_reference_names_matches_transformers(tmp_path):
    tf = pytest.importorskip("tensorflow")
    torch.manual_seed(1)
    hf_config = transformers.BertConfig(**CONFIG.to_dict())
    model = transformers.BertForPreTraining(hf_config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    variables = reference_tf_variables(model.state_dict())
    assert len(variables) == 5 + 16 * 3 + 2 + 7
    ckpt_dir = tmp_path / "uncased_L-3_H-96_A-4"
    ckpt_dir.mkdir()
    with tf.Graph().as_default():
        tf_vars = [tf.compat.v1.Variable(x, name=n) for n, x in variables.items()]
        # A training checkpoint also holds Adam slots and the step; the loader skips them.
        tf_vars.append(tf.compat.v1.Variable(np.zeros(2, np.float32), name="cls/seq_relationship/"
                                             "output_bias/adam_m"))  # fmt: skip
        tf_vars.append(tf.compat.v1.Variable(np.int64(7), name="global_step"))
        saver = tf.compat.v1.train.Saver(tf_vars)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, str(ckpt_dir / "bert_model.ckpt"))
    CONFIG.to_json_file(ckpt_dir / "bert_config.json")

    pre = load_pretrained(ckpt_dir / "bert_model.ckpt")
    assert pre.heads == ("pooler", "mlm", "nsp") and pre.ignored == ()
    assert pre.do_lower_case is True  # guessed from the release-style directory name
    ids, mask, seg = inputs(5)
    mine = BertForPreTraining(pre.config).apply({"params": pre.params}, ids, mask, seg)
    with torch.no_grad():
        theirs = model(
            input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
            token_type_ids=torch.tensor(seg), output_hidden_states=True,
        )  # fmt: skip
    assert max_diff(mine.encoder.sequence_output, theirs.hidden_states[-1].numpy()) <= ATOL
    assert max_diff(mine.mlm_logits, theirs.prediction_logits.numpy()) <= ATOL
    assert max_diff(mine.nsp_logits, theirs.seq_relationship_logits.numpy()) <= ATOL

    # bert-jax convert: the same checkpoint -> a Hugging Face dir transformers reads.
    (ckpt_dir / "vocab.txt").write_text("\n".join(f"tok{i}" for i in range(1000)) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "bert_jax.cli", "convert",
         f"--init_checkpoint={ckpt_dir / 'bert_model.ckpt'}", f"--output_dir={tmp_path / 'hf'}"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    converted, info = transformers.BertForPreTraining.from_pretrained(
        tmp_path / "hf", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert (tmp_path / "hf" / "vocab.txt").read_text() == (ckpt_dir / "vocab.txt").read_text()
    with torch.no_grad():
        again = converted.eval()(torch.tensor(ids), torch.tensor(mask), torch.tensor(seg))
    assert max_diff(again.prediction_logits, theirs.prediction_logits) == 0.0


@pytest.mark.parametrize("scan_layers", [False, True])
def test_graft_encoder_into_classifier(ours, scan_layers):
    config = CONFIG.replace(scan_layers=scan_layers)
    ids, mask, seg = inputs()
    task = BertForSequenceClassification(config, num_labels=3)
    fresh = random_params(task, 2, ids, mask, seg)  # boxed, with the {"params": ...} wrapper
    grafted = graft_encoder(fresh, ours)
    scale = grafted["params"]["bert"]["embeddings"]["layer_norm"]["scale"]
    assert isinstance(scale, meta.Partitioned) and scale.names == ("embed",)
    plain = meta.unbox(grafted)["params"]
    np.testing.assert_array_equal(
        plain["classifier"]["kernel"], meta.unbox(fresh)["params"]["classifier"]["kernel"]
    )
    expect = jax.jit(BertModel(CONFIG).apply)({"params": ours["bert"]}, ids, mask, seg)
    got = jax.jit(BertModel(config).apply)({"params": plain["bert"]}, ids, mask, seg)
    assert max_diff(got.pooled_output, expect.pooled_output) <= 1e-5
    with pytest.raises(Exception, match="position_embeddings/embedding has shape"):
        small = BertForSequenceClassification(config.replace(max_position_embeddings=32), 3)
        graft_encoder(jax.eval_shape(small.init, jax.random.key(0), ids, mask, seg), ours)


def test_workdir_checkpoint_loads_and_converts(ours, tmp_path):
    """A bert-jax workdir (Orbax checkpoint written by bert_jax.checkpoint, scanned layout)
    loads through load_pretrained and converts to a Hugging Face dir."""
    from bert_jax.checkpoint import Checkpointer

    workdir = tmp_path / "workdir"
    workdir.mkdir()
    (workdir / "config.json").write_text(json.dumps({"bert": CONFIG.to_dict()}))
    ckpt = Checkpointer(workdir / "checkpoints", async_save=False)
    ckpt.save(3, {"params": stack_layers(ours)}, {"position": 0})
    ckpt.close()
    pre = load_pretrained(workdir)
    assert pre.config == CONFIG and pre.heads == ("pooler", "mlm", "nsp")
    for a, b in zip(jax.tree.leaves(pre.params), jax.tree.leaves(ours), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    export_hf(pre.config, pre.params, tmp_path / "hf")
    _, info = transformers.BertForPreTraining.from_pretrained(
        tmp_path / "hf", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
