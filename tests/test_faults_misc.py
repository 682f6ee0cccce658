"""Fault matrix, issue 32's remaining surfaces: build-vocab on text it cannot make a vocabulary
of, `compile` without libtpu, `--help` meanings, and the plots every training run leaves in its
workdir."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import time
import tomllib
from collections import defaultdict

import pytest

from bert_jax import cli_help, config_files
from bert_jax.errors import BertJaxError

ROOT = pathlib.Path(__file__).resolve().parents[1]
_FINETUNE_CONFIGS = ("glue.py", "squad.py", "ner.py", "swag.py")


@pytest.mark.parametrize("name", config_files.known_configs())
def test_every_config_field_in_help_has_its_own_meaning(name):
    """Each `--config.<key>` line says what that key does: not blank, and not the heading of the
    comment block above a group of keys (learning_rate used to read "Optimisation
    (bert_jax.train.optimizer).", like every key of its group)."""
    meanings = cli_help.config_meanings(name)
    assert len(meanings) > 20, name
    blank = [k for k, v in meanings.items() if not v]
    assert not blank, (name, blank)
    groups = defaultdict(set)  # meaning -> the top-level keys showing it
    for key, meaning in meanings.items():
        groups[meaning].add(key.split(".")[0])
    shared = {m: keys for m, keys in groups.items() if len(keys) > 1}
    assert not shared, (name, shared)
    assert "learning rate" in meanings["learning_rate"]
    subcommand = "finetune" if name in _FINETUNE_CONFIGS else "pretrain"
    text = "\n".join(cli_help.config_help(subcommand, [f"--config={name}"]))
    assert re.search(r"--config\.learning_rate=\S+ +peak learning rate", text)


# ---- build-vocab ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    """A 100 KB corpus (the shipped snapshot text) and a finished vocab set built from it."""
    from bert_jax.corpus import snapshot
    from bert_jax.tokenization import build_vocab

    root = tmp_path_factory.mktemp("small_vocab")
    snapshot.write_corpus(root / "corpus.txt", max_bytes=100_000)
    build_vocab(str(root / "corpus.txt"), 1000, root / "vocab", num_threads=1)
    return root


def _vocab_set(out) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_build_vocab_refuses_binary_input_naming_file_and_line(small_vocab, tmp_path):
    """Random bytes (no NUL among them) used to be decoded with replacement characters and made
    into a vocab of noise, exit 0; now refused before anything is read or written."""
    from bert_jax.tokenization import build_vocab
    from bert_jax.tokenization.byte_bpe_builder import build_byte_bpe

    blob = tmp_path / "model.bin"
    blob.write_bytes(bytes(range(1, 256)) * 200)
    before = _vocab_set(small_vocab / "vocab")
    for build in (build_vocab, build_byte_bpe):
        with pytest.raises(BertJaxError, match=rf"{blob}: \d+ of the first \d+ lines are not "
                                                r"UTF-8 \(the first: line 2; binary"):  # fmt: skip
            build(str(blob), 1000, small_vocab / "vocab")
    assert _vocab_set(small_vocab / "vocab") == before
    nul = tmp_path / "nul.bin"
    nul.write_bytes(b"some text\nmore\n\x00\x01")
    with pytest.raises(BertJaxError, match=r"NUL bytes .* \(the first on line 3\)"):
        build_vocab(str(nul), 1000, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_build_vocab_refuses_a_size_the_corpus_cannot_fill(small_vocab, tmp_path):
    """10,000,000 entries on a 100 KB file: refused in seconds, before sentencepiece trains,
    with the most the corpus supports (was: a 159 MB vocab.txt of [unused] fillers after 203 s,
    exit 0). A size BPE's bound allows but training leaves more than a quarter
    fillers is refused after training, before anything is written; the old vocab set stays whole."""
    from bert_jax.tokenization import build_vocab

    out = small_vocab / "vocab"
    before = _vocab_set(out)
    t0 = time.time()
    with pytest.raises(BertJaxError) as e:
        build_vocab(str(small_vocab / "corpus.txt"), 10_000_000, out, num_threads=1)
    bound = int(re.search(r"supports at most (\d+) entries", str(e.value)).group(1))
    assert str(e.value).startswith("--vocab_size=10000000: the corpus supports at most")
    assert f"Use --vocab_size={bound} or less" in str(e.value)
    assert time.time() - t0 < 30 and bound < 100_000
    assert _vocab_set(out) == before
    with pytest.raises(BertJaxError) as e:
        build_vocab(str(small_vocab / "corpus.txt"), bound, out, num_threads=1)
    yields = int(re.search(r"the corpus yields (\d+) entries, so \d+ of the \d+ would be "
                           r"\[unused\] fillers", str(e.value)).group(1))  # fmt: skip
    assert f"Use --vocab_size={yields} or less" in str(e.value)
    assert _vocab_set(out) == before
    stats = build_vocab(str(small_vocab / "corpus.txt"), yields, tmp_path, num_threads=1)
    # the size it names works (sentencepiece asked for fewer pieces may give a few less)
    assert stats["unused_added_for_small_corpus"] <= yields // 100


# ---- compile without libtpu -----------------------------------------------------------------
def test_compile_without_the_tpu_extra_names_the_install_command(tmp_path):
    """Without libtpu, jax's "TPU support not installed; cannot generate TPU topology" used to be
    the whole message; now one line names the extra that installs it (pyproject.toml's `tpu`)."""
    blocker = tmp_path / "site" / "libtpu"  # an installed libtpu that cannot be imported
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named libtpu')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    env.pop("JAX_PLATFORMS", None)
    cmd = [sys.executable, "-m", "bert_jax.cli", "compile", "--config=pretrain.py:tiny",
           "--topology=v4-8"]  # fmt: skip
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("bert-jax: error: compiling for a TPU slice needs libtpu")
    assert "pip install 'bert-jax[tpu]'" in r.stderr and "pip install -e '.[tpu]'" in r.stderr
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("jax[tpu]") for d in extras["optional-dependencies"]["tpu"])


# ---- curves at the end of every run ---------------------------------------------------------
def _ends_with_curves(out: str, workdir) -> None:
    """The run's last two lines: the PNG (an image of the curves) and how to open the events."""
    import matplotlib.image

    last = out.strip().splitlines()[-2:]
    png = pathlib.Path(workdir) / "curves.png"
    assert last[0] == f"curves (loss, accuracy, held-out evaluations): {png}", out
    tb = pathlib.Path(workdir) / "tensorboard"
    assert last[1].endswith(f"pip install tensorboard && tensorboard --logdir {tb}"), out
    assert any(tb.glob("events.out.tfevents.*"))
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 200 and image.shape[1] > 400


def test_pretraining_run_ends_with_its_curves_png(small_vocab, tmp_path, capsys):
    """Only the demo used to draw a loss curve; every pretraining workdir now has curves.png."""
    from bert_jax.data.pipeline import create_pretraining_data
    from bert_jax.runs.pretrain import run_pretraining
    from bert_jax.train.config import pretrain_config

    vocab = str(small_vocab / "vocab" / "vocab.txt")
    shards = tmp_path / "shards"
    create_pretraining_data(str(small_vocab / "corpus.txt"), str(shards), vocab, dupe_factor=1,
                            max_seq_length=32, max_predictions_per_seq=5)  # fmt: skip
    c = pretrain_config("L1-H32-A2")
    c.update(dict(dtype="float32", train_files=str(shards / "shard-*.tfrecord"), vocab_file=vocab,
                  max_seq_length=32, max_predictions_per_seq=5, global_batch_size=8,
                  train_steps=3, warmup_steps=1, log_every_steps=1))  # fmt: skip
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 1, 1
    run_pretraining(c, str(tmp_path / "w"))
    _ends_with_curves(capsys.readouterr().out, tmp_path / "w")


def test_finetuning_run_ends_with_its_curves_png(tiny_hf_dir, tmp_path, capsys):
    from bert_jax.configs import glue
    from bert_jax.runs import finetune as runner

    cfg = glue.get_config("mrpc")
    cfg.update(dict(init_checkpoint=str(tiny_hf_dir), do_lower_case=True, max_seq_length=32,
                    data_dir=str(ROOT / "tests" / "fixtures" / "tasks" / "glue" / "mrpc"),
                    train_batch_size=8, eval_batch_size=8, num_train_epochs=1.0,
                    log_every_steps=1, num_devices=1))  # fmt: skip
    results = runner.finetune(cfg, str(tmp_path))
    _ends_with_curves(capsys.readouterr().out, tmp_path)
    assert "accuracy" in results


# ---- the demo -------------------------------------------------------------------------------
def test_demo_workdir_trained_with_nsp_is_retrained_masked_lm_only(tmp_path):
    """A workdir from before `--objective` (masked LM + NSP) keeps its corpus, vocab and shards;
    only the pretraining is redone for the masked-LM-only default."""
    from bert_jax.runs.demo_workdir import SETTINGS_FILE, refresh_workdir

    old = {"corpus": "embedded", "corpus_mb": 3.0, "vocab_size": 2000, "max_seq_length": 64,
           "train_steps": 3000}  # fmt: skip
    (tmp_path / "data" / "vocab").mkdir(parents=True)
    (tmp_path / "data" / SETTINGS_FILE).write_text(json.dumps(old))
    (tmp_path / "pretrain" / "checkpoints").mkdir(parents=True)
    changed, rebuilt = refresh_workdir(tmp_path, {**old, "objective": "mlm"})
    assert changed == {"objective": ("mlm_nsp", "mlm")} and rebuilt == ["pretraining"]
    assert (tmp_path / "data" / "vocab").exists() and not (tmp_path / "pretrain").exists()
