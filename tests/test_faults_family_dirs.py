"""Fault matrix, issue 32 (family directories and the task readers): a Hugging Face directory of
any family loads its own tokenizer in every command, a directory whose config is too small for
its tokenizer is refused instead of training on clipped ids, what `convert` cannot export is
named, and the task readers and extract-features end in one line naming the file, line, question
or flag instead of a traceback."""

from __future__ import annotations

import io
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from bert_jax.corpus import embedded
from bert_jax.errors import BertJaxError
from bert_jax.features import load_encoder
from bert_jax.runs import finetune as runner
from bert_jax.tasks import ner, squad, swag
from bert_jax.train.config import finetune_config

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEXT = "The Café sat on the mat in 1999, Mr. Smith's ``cat'' said."
TINY = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", "bert_jax.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.fixture(scope="module")
def albert_dirs(tmp_path_factory) -> dict[str, pathlib.Path]:
    """A tiny ALBERT written by transformers with a sentencepiece model trained here: "hub" has
    spiece.model + tokenizer.json (as albert-base-v2 on the Hub), "v5" tokenizer.json alone (what
    transformers v5 saves)."""
    import sentencepiece as spm
    import torch
    import transformers

    sentences = [s for doc in embedded.iter_documents(max_documents=100) for s in doc]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=400,
        model_type="unigram", control_symbols="[CLS],[SEP],[MASK]", pad_id=0, unk_id=1,
        bos_id=-1, eos_id=-1, num_threads=1, minloglevel=2,
    )  # fmt: skip
    hub, v5 = tmp_path_factory.mktemp("albert_hub"), tmp_path_factory.mktemp("albert_v5")
    (hub / "spiece.model").write_bytes(model.getvalue())
    proc = spm.SentencePieceProcessor(model_file=str(hub / "spiece.model"))
    pieces = [(proc.IdToPiece(i), proc.GetScore(i)) for i in range(proc.GetPieceSize())]
    torch.manual_seed(0)
    net = transformers.AlbertModel(transformers.AlbertConfig(vocab_size=400, embedding_size=16,
                                                              **TINY))  # fmt: skip
    for d in (hub, v5):
        transformers.AlbertTokenizer(vocab=pieces, unk_token="<unk>").save_pretrained(d)
        net.save_pretrained(d)
    return {"hub": hub, "v5": v5}


@pytest.mark.parametrize("which", ["hub", "v5"])
def test_albert_directory_loads_its_tokenizer(albert_dirs, which):
    """Was: "no vocab.txt (nor vocab.json + merges.txt or tokenizer.json)" from extract-features,
    attention-map (load_encoder) and finetune although the directory holds its tokenizer."""
    import transformers

    d = albert_dirs[which]
    theirs = transformers.AutoTokenizer.from_pretrained(str(d))
    want = theirs(TEXT, add_special_tokens=False)["input_ids"]
    _, _, tokenizer = load_encoder(d)
    assert tokenizer.convert_tokens_to_ids(tokenizer.tokenize(TEXT)) == want
    cfg = finetune_config("glue")
    cfg.init_checkpoint, cfg.max_seq_length = str(d), 32
    tokenizer, _, lower = runner._tokenizer_and_weights(cfg)
    assert lower and tokenizer.encode(TEXT) == want


def test_extract_features_max_seq_length_of_two_is_one_line(tmp_path):
    """Was a traceback (3 works): now one line naming the flag, before the model is read."""
    (tmp_path / "in.txt").write_text(TEXT + "\n")
    r = _cli("extract-features", f"--input_file={tmp_path / 'in.txt'}",
             f"--output_file={tmp_path / 'out.jsonl'}", f"--init_checkpoint={tmp_path / 'none'}",
             "--max_seq_length=2")  # fmt: skip
    assert r.returncode == 2 and r.stderr.strip() == (
        "bert-jax: error: --max_seq_length=2: must be >= 3 (two special tokens and one token)"
    )
    assert not (tmp_path / "out.jsonl").exists()


def test_albert_directory_through_extract_features(albert_dirs, tmp_path):
    """The issue's run (was: "no vocab.txt"), at the smallest --max_seq_length, with a pair."""
    from bert_jax.runs.features import extract_features

    (tmp_path / "in.txt").write_text(TEXT + "\nA second line. ||| And its pair.\n")
    args = (str(albert_dirs["hub"]), tmp_path / "in.txt", tmp_path / "out.jsonl", [-1])
    with pytest.raises(BertJaxError, match="^--max_seq_length=1: must be >= 3"):
        extract_features(*args, 1, 8)
    assert extract_features(*args, 3, 8) == 2
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [[t["token"] for t in row["features"]] for row in rows] == [
        ["[CLS]", rows[0]["features"][1]["token"], "[SEP]"],
        ["[CLS]", "[SEP]", "[SEP]"],
    ]


def test_extract_features_pair_needs_room_for_its_special_tokens(tmp_path):
    """RoBERTa's pair layout has 4 special tokens: --max_seq_length=3 with a pair was an
    IndexError from the truncation loop."""
    from bert_jax.features.extract import Example, check_seq_length

    check_seq_length(3, 3, [Example(0, "a", "b")])  # BERT: [CLS] [SEP] [SEP]
    with pytest.raises(BertJaxError, match=r"^--max_seq_length=3: the input has `a \|\|\| b` pa"):
        check_seq_length(3, 4, [Example(0, "a", "b")])
    with pytest.raises(BertJaxError, match="^--max_seq_length=1: must be >= 3"):
        check_seq_length(1, 3, [Example(0, "a", None)])


def test_config_vocab_smaller_than_the_tokenizer_is_refused(tmp_path, uncased_vocab):
    """Was: a BERT whose config has 1,000 ids beside the 30,522-token uncased vocab trained and
    extracted features on ids clipped to row 999 (transformers raises an index error)."""
    import torch
    import transformers

    torch.manual_seed(0)
    transformers.BertModel(transformers.BertConfig(vocab_size=1000, **TINY)).save_pretrained(
        tmp_path
    )
    shutil.copy(uncased_vocab, tmp_path / "vocab.txt")
    want = f"^{tmp_path}: config vocab_size 1000 is smaller than its tokenizer's 30522 ids"
    with pytest.raises(BertJaxError, match=want):
        load_encoder(tmp_path)
    cfg = finetune_config("glue")
    cfg.init_checkpoint, cfg.max_seq_length = str(tmp_path), 32
    with pytest.raises(BertJaxError, match=want):
        runner._tokenizer_and_weights(cfg)


def test_xlnet_config_vocab_smaller_than_its_spiece_model_is_refused(xlnet_dir, tmp_path):
    """The same for XLNet (features and fine-tuning), with 500 of the model's 600 pieces."""
    import torch
    import transformers

    from bert_jax.arch.xlnet.features import extract_xlnet_to_file

    shutil.copy(xlnet_dir / "spiece.model", tmp_path / "spiece.model")
    cfg = transformers.XLNetConfig(vocab_size=500, d_model=32, n_layer=1, n_head=4, d_inner=64)
    torch.manual_seed(0)
    transformers.XLNetModel(cfg).save_pretrained(tmp_path)
    (tmp_path / "in.txt").write_text("a line\n")
    want = f"^{tmp_path}: config vocab_size 500 is smaller than its tokenizer's 600 ids"
    with pytest.raises(BertJaxError, match=want):
        extract_xlnet_to_file(tmp_path, tmp_path / "in.txt", tmp_path / "out.jsonl", [-1])
    assert not (tmp_path / "out.jsonl").exists()
    ft = finetune_config("glue")
    ft.init_checkpoint, ft.max_seq_length = str(tmp_path), 32
    with pytest.raises(BertJaxError, match=want):
        runner._tokenizer_and_weights(ft)


def test_convert_names_an_encoder_decoder_transformers_cannot_hold(tmp_path):
    """A seq2seq workdir of our own Transformer layout (not T5's) converts to nothing: the line
    names what differs, before the checkpoint is read (was: "has no 'bert' model config")."""
    from bert_jax.arch.seq2seq import Seq2SeqConfig
    from bert_jax.runs.export import convert_any

    cfg = Seq2SeqConfig(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
                        family="transformer", position="sinusoidal", norm="layer_post",
                        use_bias=True)  # fmt: skip
    work = tmp_path / "tx"
    (work / "checkpoints").mkdir(parents=True)
    (work / "config.json").write_text(json.dumps({"seq2seq": cfg.to_dict()}))
    with pytest.raises(BertJaxError, match=rf"^{work}: transformers has no class for this enc"):
        convert_any(str(work), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "answers, is_training",
    [({"text": "Denver", "answer_start": 3}, True), ("Denver", True), (["Denver"], False)],
    ids=["object", "string", "list_of_strings_dev"],
)
def test_squad_answers_that_are_not_a_list_of_objects(tmp_path, answers, is_training):
    """Was: KeyError / AttributeError tracebacks (and a dev file got as far as scoring)."""
    qa = {"id": "q-17", "question": "Who?", "answers": answers}
    data = {"data": [{"paragraphs": [{"context": "In Denver it rained.", "qas": [qa]}]}]}
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BertJaxError, match=rf"^{path}: question q-17: 'answers' is a "):
        squad.read_examples(str(path), is_training, version_2=False)


def test_ner_and_swag_files_that_are_not_utf8_name_the_line(tmp_path):
    """Was: UnicodeDecodeError tracebacks; now as the GLUE reader (test_faults_tasks.py)."""
    conll = tmp_path / "train.txt"
    conll.write_bytes(b"EU B-ORG\nrejects O\n\nCaf\xe9 B-LOC\n")
    with pytest.raises(BertJaxError, match=rf"^{conll}: line 4: not UTF-8 \(byte 0xe9; Latin-1"):
        ner.read_conll(str(conll))
    csv = tmp_path / "val.csv"
    header = b"video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,"
    csv.write_bytes(header + b"ending3,label\nv,0,a,A man,He,gold,x,y,z,w,0\nv,1,b,Jos\xe9,He,"
                    b"gold,x,y,z,w,1\n")  # fmt: skip
    with pytest.raises(BertJaxError, match=rf"^{csv}: line 3: not UTF-8 \(byte 0xe9"):
        swag.read_swag(str(csv))


@pytest.mark.parametrize("content", ["[1, 2]", '"bert"'])
def test_config_json_that_is_not_an_object_is_one_line(tmp_path, content, uncased_vocab):
    """A config.json holding a list (or a string) is named with what was expected, by the shared
    family lookup every command starts with and by the readers behind it (before: an
    AttributeError traceback from `.get`)."""
    from bert_jax.arch import registry
    from bert_jax.atomic_write import read_json_object
    from bert_jax.runs.export import convert_any

    (tmp_path / "config.json").write_text(content)
    shutil.copy(uncased_vocab, tmp_path / "vocab.txt")
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"x": np.zeros(2, np.float32)}, str(tmp_path / "model.safetensors"))
    found = type(json.loads(content)).__name__
    for call in (lambda: registry.for_checkpoint(tmp_path),
                 lambda: load_encoder(str(tmp_path)),
                 lambda: convert_any(str(tmp_path), str(tmp_path / "out")),
                 lambda: read_json_object(tmp_path / "config.json", "missing")):  # fmt: skip
        with pytest.raises(BertJaxError, match=f"expected a JSON object .*found a {found}"):
            call()


def test_convert_into_another_models_export_is_refused_and_replaces_only_on_request(
    tiny_hf_dir, xlnet_dir, tmp_path
):
    """An --output_dir holding another family's export (config.json's model_type) is refused by
    name and left as it was; --overwrite_output_dir replaces it whole. Re-exporting the same
    family over its own export works, and no file of the old model survives a successful export
    (was: rc 0, 4 of 5 files overwritten, XLNet's tokenizer.json kept beside T5's weights)."""
    from bert_jax.runs.export import convert_any

    out = tmp_path / "out"
    convert_any(str(xlnet_dir), str(out))
    (out / "tokenizer.json").write_text('{"model": {"type": "Unigram"}}')  # as a hub XLNet has
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    want = rf"^--output_dir={out} holds another model \(config.json model_type 'xlnet'\), .*bert"
    with pytest.raises(BertJaxError, match=want):
        convert_any(str(tiny_hf_dir), str(out))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    convert_any(str(tiny_hf_dir), str(out), overwrite_output_dir=True)
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"
    ]  # fmt: skip
    assert json.loads((out / "config.json").read_text())["model_type"] == "bert"
    # The same family over its own export: replaced, with a stray tokenizer file of another
    # tokenizer removed (AutoTokenizer would prefer it to vocab.txt).
    (out / "tokenizer.json").write_text("{}")
    convert_any(str(tiny_hf_dir), str(out))
    assert not (out / "tokenizer.json").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no staging left
    # A bert-jax workdir is never an export's target (its config.json is the run's).
    work = tmp_path / "work"
    (work / "checkpoints").mkdir(parents=True)
    (work / "config.json").write_text("{}")
    with pytest.raises(BertJaxError, match=rf"^--output_dir={work}: a bert-jax workdir"):
        convert_any(str(tiny_hf_dir), str(work), overwrite_output_dir=True)
    assert (work / "config.json").read_text() == "{}"
