"""The encoder-decoder family against transformers' T5ForConditionalGeneration (PyTorch) on the
same random weights: hidden states and logits, cached decoding, export, greedy and beam search."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from bert_jax.arch.seq2seq import EncoderDecoder, stack_seq2seq  # noqa: E402
from bert_jax.arch.seq2seq.decoding import GenerateSettings, Seq2SeqGenerator, trim  # noqa: E402
from bert_jax.arch.seq2seq.t5_checkpoints import export_t5, read_t5_dir  # noqa: E402

D = 32
LAYOUTS = {  # v1.0: ReLU, tied and rescaled head; v1.1: gated GELU, own head, no rescale
    "v1_0": dict(feed_forward_proj="relu", tie_word_embeddings=True),
    "v1_1": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False),
}


def _hf_model(layout: str, decoder_layers: int, eos_scale: float | None = None):
    torch.manual_seed(0)
    cfg = transformers.T5Config(
        vocab_size=40, d_model=D, d_kv=8, d_ff=48, num_layers=2, num_decoder_layers=decoder_layers,
        num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=20,
        decoder_start_token_id=0, **LAYOUTS[layout],
    )  # fmt: skip
    model = transformers.T5ForConditionalGeneration(cfg).eval()
    if layout == "v1_1":  # an untied head of its own (transformers 5 ties unless both differ)
        with torch.no_grad():
            w = torch.randn(40, D) * D**-0.5
            if eos_scale is not None:
                # Point EOS's row along the mean decoder state so that some sequences end early
                # and the finished-hypothesis logic of beam search is exercised.
                ids = torch.randint(2, 40, (6, 12))
                model.lm_head.weight = torch.nn.Parameter(w.clone())
                out = model(input_ids=ids, decoder_input_ids=torch.randint(2, 40, (6, 8)),
                            output_hidden_states=True)  # fmt: skip
                h = out.decoder_hidden_states[-1].reshape(-1, D).mean(0)
                w[1] = eos_scale * h / h.norm() ** 2 * out.logits.max(-1).values.mean()
            model.lm_head.weight = torch.nn.Parameter(w)
    return model


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory) -> dict:
    out = {}
    for layout in LAYOUTS:
        path = tmp_path_factory.mktemp(layout)
        _hf_model(layout, decoder_layers=3).save_pretrained(path)
        out[layout] = path
    return out


def _inputs(seed: int = 0):
    rs = np.random.RandomState(seed)
    ids = rs.randint(2, 40, (3, 14))
    mask = np.ones_like(ids)
    mask[1, 9:] = 0
    ids[1, 9:] = 0
    dec = np.concatenate([np.zeros((3, 1), int), rs.randint(2, 40, (3, 10))], axis=1)
    return ids, mask, dec


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_parity_with_transformers(hf_dirs, layout):
    hf = transformers.T5ForConditionalGeneration.from_pretrained(hf_dirs[layout]).eval()
    cfg, params = read_t5_dir(hf_dirs[layout])
    assert cfg.tie_word_embeddings == (layout == "v1_0")
    assert cfg.scale_decoder_outputs == (layout == "v1_0")
    assert (cfg.num_layers, cfg.num_decoder_layers) == (2, 3)
    ids, mask, dec = _inputs()
    with torch.no_grad():
        ref = hf(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                 decoder_input_ids=torch.tensor(dec), output_hidden_states=True)  # fmt: skip
    real = mask.astype(bool)
    for scan in (False, True):
        model = EncoderDecoder(cfg.replace(scan_layers=scan))
        p = stack_seq2seq(params) if scan else params
        out = model.apply({"params": p}, ids, mask, dec)
        enc = np.asarray(out.encoder_hidden_BxSxD)[real]
        np.testing.assert_allclose(enc, ref.encoder_last_hidden_state.numpy()[real], atol=1e-5)
        np.testing.assert_allclose(np.asarray(out.decoder_hidden_BxTxD),
                                   ref.decoder_hidden_states[-1].numpy(), atol=1e-5)  # fmt: skip
        np.testing.assert_allclose(np.asarray(out.logits_BxTxV), ref.logits.numpy(), atol=1e-5)


@pytest.mark.parametrize(("layout", "scan"), [("v1_0", False), ("v1_1", True)])
def test_cached_decoding_equals_uncached(hf_dirs, layout, scan):
    cfg, params = read_t5_dir(hf_dirs[layout])
    ids, mask, dec = _inputs(1)
    model = EncoderDecoder(cfg.replace(scan_layers=scan))
    p = stack_seq2seq(params) if scan else params
    full = np.asarray(model.apply({"params": p}, ids, mask, dec).logits_BxTxV)
    enc = model.apply({"params": p}, ids, mask, method=EncoderDecoder.encode)
    t = dec.shape[1]
    _, v = model.apply({"params": p}, jnp.zeros((3, t), jnp.int32), enc, mask, decode=True,
                       method=EncoderDecoder.decode, mutable=["cache"])  # fmt: skip

    @jax.jit
    def step(cache, ids_Bx1):
        (logits, _), v = model.apply(
            {"params": p, "cache": cache}, ids_Bx1, None, mask, decode=True,
            method=EncoderDecoder.decode, mutable=["cache"],
        )  # fmt: skip
        return logits[:, 0], v["cache"]

    cache, steps = v["cache"], []
    for i in range(t):
        logits, cache = step(cache, dec[:, i : i + 1])
        steps.append(np.asarray(logits))
    np.testing.assert_allclose(np.stack(steps, 1), full, atol=1e-5)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_export_loads_in_transformers(hf_dirs, layout, tmp_path):
    cfg, params = read_t5_dir(hf_dirs[layout])
    export_t5(cfg, stack_seq2seq(params), tmp_path / "out")
    again = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path / "out").eval()
    ids, mask, dec = _inputs(2)
    with torch.no_grad():
        ref = again(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                    decoder_input_ids=torch.tensor(dec)).logits.numpy()  # fmt: skip
    ours = np.asarray(EncoderDecoder(cfg).apply({"params": params}, ids, mask, dec).logits_BxTxV)
    np.testing.assert_allclose(ours, ref, atol=1e-5)
    cfg2, params2 = read_t5_dir(tmp_path / "out")
    assert cfg2 == cfg


@pytest.mark.slow
def test_generate_equals_transformers(tmp_path):
    hf = _hf_model("v1_1", decoder_layers=2, eos_scale=0.75)
    hf.save_pretrained(tmp_path)
    hf = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path).eval()
    cfg, params = read_t5_dir(tmp_path)
    model = EncoderDecoder(cfg)
    rs = np.random.RandomState(3)
    ids = rs.randint(2, 40, (6, 12))
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    ids[1, 7:] = 0
    lengths = set()
    for beams, lp, early in ((1, 1.0, False), (4, 2.0, True), (4, 0.5, "never")):
        with torch.no_grad():
            ref = hf.generate(
                input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), num_beams=beams,
                max_new_tokens=12, do_sample=False, length_penalty=lp, early_stopping=early,
            ).numpy()  # fmt: skip
        settings = GenerateSettings(max_new_tokens=12, num_beams=beams, length_penalty=lp,
                                    early_stopping=early)  # fmt: skip
        ours = np.asarray(Seq2SeqGenerator(model, settings)(params, ids, mask))
        for r in range(len(ids)):
            got, want = trim(ours[r], cfg.eos_token_id), trim(ref[r, 1:], cfg.eos_token_id)
            assert got == want, (beams, lp, early, r)
            lengths.add(len(got))
    assert min(lengths) < 12, "no sequence ended with EOS: the test does not exercise it"


# --- a T5 directory with tokenizer.json alone (what transformers v5 saves) -----------------------

TEXTS = ["The cat sat on the mat in 1999.", "Who wrote it? <extra_id_0> nobody <extra_id_1>.", ""]


@pytest.fixture(scope="module")
def t5_json_dir(tmp_path_factory):
    """A T5 directory written by transformers whose tokenizer is tokenizer.json alone: T5's
    layout (pad 0, eos 1, unk 2, the pieces, then <extra_id_99> .. <extra_id_0>), as
    T5Tokenizer converts a Hub spiece.model; no spiece.model beside it."""
    import sentencepiece as spm

    from bert_jax.corpus import embedded
    from bert_jax.tokenization.t5_vocab import train_t5_spm

    work, d = tmp_path_factory.mktemp("spm"), tmp_path_factory.mktemp("t5_json")
    lines = [s for doc in embedded.iter_documents(max_documents=200) for s in doc]
    proc = spm.SentencePieceProcessor(model_file=str(train_t5_spm(lines, work, 300)))
    vocab = [(proc.IdToPiece(i), proc.GetScore(i)) for i in range(proc.GetPieceSize())]
    vocab += [(f"<extra_id_{i}>", 0.0) for i in range(99, -1, -1)]
    transformers.T5Tokenizer(vocab=vocab, extra_ids=100).save_pretrained(d)
    torch.manual_seed(0)
    cfg = transformers.T5Config(
        vocab_size=len(vocab), d_model=D, d_kv=8, d_ff=48, num_layers=1, num_heads=4,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False, decoder_start_token_id=0,
    )  # fmt: skip
    model = transformers.T5ForConditionalGeneration(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(d)
    assert not (d / "spiece.model").exists() and (d / "tokenizer.json").exists()
    return d


def test_t5_dir_with_only_tokenizer_json_tokenizes_as_transformers(t5_json_dir):
    """The loader finds tokenizer.json; our ids (sentinels included) are transformers' ids, and
    decoding gives the text back."""
    from bert_jax.arch.seq2seq.load import load_seq2seq
    from bert_jax.tokenization.t5_vocab import T5Vocab

    pre = load_seq2seq(t5_json_dir)
    assert pre.spm_model == t5_json_dir / "tokenizer.json"
    vocab = T5Vocab.for_model(pre.spm_model, pre.config.vocab_size)
    tok = transformers.AutoTokenizer.from_pretrained(t5_json_dir)
    assert (vocab.pieces, vocab.size, vocab.sentinel(0)) == (300, 400, 399)
    for text in TEXTS:
        assert vocab.encode(text) == tok(text)["input_ids"], text
    back = "Who wrote it? <extra_id_0> nobody <extra_id_1> ."
    assert vocab.decode(vocab.encode(TEXTS[1])) == back
    cat = tok("cat")["input_ids"][0]
    assert vocab.sp.IdToPiece(cat) == tok.convert_ids_to_tokens(cat)


@pytest.mark.slow  # fine-tuning compiles, and generate runs as the CLI
def test_t5_dir_with_only_tokenizer_json_through_finetune_convert_generate(t5_json_dir, tmp_path):
    """extract-features (transformers' tokens) and fine-tuning (2 steps) read tokenizer.json; the
    fine-tuned workdir converts to a directory transformers loads, with the tokenizer.json beside
    it, whose greedy outputs are the ones the run wrote; `bert-jax generate` on the directory
    gives transformers' greedy ids."""
    import json
    import pathlib
    import subprocess
    import sys

    from bert_jax.runs import finetune as runner
    from bert_jax.runs.export import convert_any
    from bert_jax.runs.features import extract_features
    from bert_jax.tokenization.t5_vocab import T5Vocab
    from bert_jax.train.config import finetune_config

    (tmp_path / "in.txt").write_text("\n".join(TEXTS[:2]) + "\n")
    tok = transformers.AutoTokenizer.from_pretrained(t5_json_dir)
    extract_features(str(t5_json_dir), tmp_path / "in.txt", tmp_path / "f.jsonl", [-1], 32, 2)
    rows = [json.loads(x) for x in (tmp_path / "f.jsonl").read_text().splitlines()]
    for row, text in zip(rows, TEXTS[:2], strict=True):
        tokens = [t["token"] for t in row["features"]]
        assert tok.convert_tokens_to_ids(tokens) == tok(text)["input_ids"]

    glue = pathlib.Path(__file__).parent / "fixtures" / "tasks" / "glue" / "sst2"
    cfg = finetune_config("glue")
    cfg.task, cfg.data_dir, cfg.num_train_epochs = "sst2", str(glue), 1.0
    cfg.init_checkpoint, cfg.max_seq_length, cfg.max_target_length = str(t5_json_dir), 32, 4
    cfg.num_devices, cfg.train_batch_size, cfg.eval_batch_size = 1, 2, 4
    work, out = tmp_path / "work", tmp_path / "exported"
    assert runner.finetune(cfg, str(work))["train_steps"] == 2
    convert_any(str(work), str(out))
    assert (out / "tokenizer.json").read_bytes() == (t5_json_dir / "tokenizer.json").read_bytes()
    tok = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.T5ForConditionalGeneration.from_pretrained(out).eval()
    vocab = T5Vocab.for_model(out / "tokenizer.json", model.config.vocab_size)
    rows = [json.loads(x) for x in (work / "dev_predictions.jsonl").read_text().splitlines()]
    enc = tok([r["input"] for r in rows], padding=True, return_tensors="pt")
    with torch.no_grad():
        gen = model.generate(**enc, max_new_tokens=4, do_sample=False, num_beams=1)
    assert [vocab.decode(ids) for ids in gen.tolist()] == [r["output"] for r in rows]

    cmd = [sys.executable, "-m", "bert_jax.cli", "generate", f"--init_checkpoint={t5_json_dir}",
           f"--input_file={tmp_path / 'in.txt'}", f"--output_file={tmp_path / 'gen.jsonl'}",
           "--max_new_tokens=6", "--batch_size=2"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ours = [json.loads(x)["output_ids"] for x in (tmp_path / "gen.jsonl").read_text().splitlines()]
    source = transformers.T5ForConditionalGeneration.from_pretrained(t5_json_dir).eval()
    for text, ids in zip(TEXTS[:2], ours, strict=True):
        with torch.no_grad():
            ref = source.generate(**tok(text, return_tensors="pt"), max_new_tokens=6,
                                  do_sample=False)[0, 1:].numpy()  # fmt: skip
        assert ids == trim(ref, 1)
