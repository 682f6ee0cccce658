"""`bert-jax ablate --corpus` and `--vocab_file` (issue 57): the corpus is streamed in two passes
(memory flat as it grows), a tensorflow-datasets builder gives the same split as the same text
in files, and a given vocab (vocab.txt or sentencepiece model) replaces a trained one."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from bert_jax.ablations import corpus_split, given_vocab
from bert_jax.ablations.run import scale_for
from bert_jax.ablations.workdir import Workdir
from bert_jax.errors import BertJaxError

_SENTENCE_INSIDE = re.compile(r"[.!?]\s")


def _documents(n: int) -> list[list[str]]:
    """Real English documents whose lines are single sentences (as a tfds text example split
    into sentences gives them back)."""
    from bert_jax.corpus import embedded

    docs = []
    for doc in embedded.iter_documents():
        if not any(_SENTENCE_INSIDE.search(line) for line in doc):
            docs.append(doc)
        if len(docs) == n:
            return docs
    raise AssertionError("the embedded corpus has too few documents")


def _write_files(docs: list[list[str]], directory, files: int = 3) -> str:
    directory.mkdir()
    for i in range(files):
        text = "".join("\n".join(d) + "\n\n" for d in docs[i::files])
        (directory / f"part-{i}.txt").write_text(text, encoding="utf-8")
    return str(directory / "part-*.txt")


def test_tfds_builder_gives_the_text_files_split(tmp_path, monkeypatch):
    tfds = pytest.importorskip("tensorflow_datasets")
    docs = _documents(240)
    files = _write_files(docs, tmp_path / "text")

    class LocalDocuments(tfds.core.GeneratorBasedBuilder):
        """The test's documents, one example each (read from a local file, no download)."""

        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(
                builder=self, features=tfds.features.FeaturesDict({"body": tfds.features.Text()})
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for i, doc in enumerate(docs):
                yield i, {"body": "\n".join(doc)}

    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))
    # All the text trains (a byte budget would take the first documents of each order).
    scale = dataclasses.replace(scale_for("cpu", quick=True), corpus_bytes=0)
    by_files = Workdir(str(tmp_path / "files"), scale, files, progress=print)
    by_tfds = Workdir(str(tmp_path / "tfds_wd"), scale, "tfds:local_documents#body", progress=print)
    for workdir in (by_files, by_tfds):
        workdir.task_dir("conll")  # the split, then the suite from its held-out documents
    # The same documents on each side (in the order of each source: tfds shuffles).
    for name in ("train.txt", "held_out.txt"):
        a, b = ((tmp_path / wd / "data" / name).read_text() for wd in ("files", "tfds_wd"))
        assert sorted(a.split("\n\n")) == sorted(b.split("\n\n")), name
    record = json.loads((tmp_path / "files" / "data" / "split.json").read_text())
    from_tfds = json.loads((tmp_path / "tfds_wd" / "data" / "split.json").read_text())
    assert {k: v for k, v in record.items() if "eval" not in k} == {
        k: v for k, v in from_tfds.items() if "eval" not in k}  # fmt: skip
    assert record["documents"] == 240
    assert record["held_out_documents"] + record["train_documents"] == 240
    # The held-out sample: a fifth at most; none of its documents trains.
    assert 0 < record["held_out_bytes"] <= 0.2 * record["bytes"] + max(map(len, map(str, docs)))
    held = corpus_split.read_held_out(tmp_path / "files" / "data")
    train_text = (tmp_path / "files" / "data" / "train.txt").read_text()
    assert held and all("\n".join(d) + "\n" not in train_text for d in held)
    assert (tmp_path / "files" / "suite" / "conll" / "train.txt").stat().st_size > 0


_PEAK = textwrap.dedent(
    r"""
    import json, re, sys
    from bert_jax.ablations.run import scale_for
    from bert_jax.ablations.workdir import Workdir
    workdir = Workdir(sys.argv[1], scale_for("cpu", quick=True), sys.argv[2], progress=print)
    workdir.shards("mlm")  # split, vocab, shards: the data a pretraining run needs
    workdir.task_dir("sst2")  # and the suite
    # VmHWM: this process's own peak (ru_maxrss would carry the parent's over the exec)
    status = open("/proc/self/status").read()
    print(json.dumps(int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) // 1024))
    """
)


def _big_corpus(path, megabytes: float) -> None:
    """The embedded corpus's documents repeated, each copy a distinct document (a numbered
    first line), until `megabytes`."""
    from bert_jax.corpus import embedded

    docs = list(embedded.iter_documents(max_documents=2000))
    size, n = 0, 0
    with open(path, "w", encoding="utf-8") as f:
        while size < megabytes * 2**20:
            doc = docs[n % len(docs)]
            text = f"Copy {n} of a document.\n" + "\n".join(doc) + "\n\n"
            f.write(text)
            size, n = size + len(text.encode()), n + 1


def test_corpus_streams_in_flat_memory(tmp_path):
    """Ten times the corpus, the same peak memory: data preparation at the quick scale (its
    pretraining text is the first 150 KB; the rest is read twice and held out or left)."""
    peaks = {}
    for mb in (3, 30):
        corpus = tmp_path / f"corpus{mb}.txt"
        _big_corpus(corpus, mb)
        out = subprocess.run(
            [sys.executable, "-c", _PEAK, str(tmp_path / f"wd{mb}"), str(corpus)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        peaks[mb] = json.loads(out.stdout.strip().splitlines()[-1])
    # Holding 27 MB more of text as Python strings would add well over 27 MB.
    assert peaks[30] - peaks[3] < 12, peaks


def test_given_vocab_replaces_training(tmp_path, uncased_vocab):
    scale = scale_for("cpu", quick=True)
    corpus = _write_files(_documents(240), tmp_path / "text", files=1)
    workdir = Workdir(str(tmp_path / "wd"), scale, corpus, vocab=str(uncased_vocab), progress=print)
    vocab = workdir.vocab_file()
    assert pathlib.Path(vocab).read_bytes() == uncased_vocab.read_bytes()  # used as it is
    settings = json.loads((tmp_path / "wd" / "settings.json").read_text())
    assert settings["vocab_file"] == given_vocab.fingerprint(str(uncased_vocab))
    other = tmp_path / "other.txt"
    other.write_text(uncased_vocab.read_text() + "extra\n")
    with pytest.raises(BertJaxError, match=r"settings\.json: .*vocab_file="):
        Workdir(str(tmp_path / "wd"), scale, corpus, vocab=str(other), progress=print)
    # The CLI passes both flags on (--plan builds nothing but records the settings).
    cli = [sys.executable, "-m", "bert_jax.cli", "ablate", "--table=5", "--quick", "--plan",
           f"--workdir={tmp_path / 'wd3'}", f"--corpus={corpus}", f"--vocab_file={uncased_vocab}"]
    subprocess.run(cli, check=True, capture_output=True)
    settings = json.loads((tmp_path / "wd3" / "settings.json").read_text())
    assert (settings["corpus"], settings["vocab_file"]) == (corpus, given_vocab.fingerprint(
        str(uncased_vocab)))  # fmt: skip
    broken = tmp_path / "broken.txt"
    broken.write_text("[PAD]\n[UNK]\nthe\n")
    with pytest.raises(BertJaxError, match=r"--vocab_file=\S+broken\.txt: no \[CLS\], \[SEP\]"):
        Workdir(str(tmp_path / "wd2"), scale, corpus, vocab=str(broken), progress=print)
    assert not (tmp_path / "wd2" / "settings.json").exists()
    (tmp_path / "latin1.txt").write_bytes("[PAD]\ncaf\xe9\n".encode("latin-1"))
    for path, message in ((tmp_path / "none.txt", "no such file"),
                          (tmp_path, "a directory; give its vocab.txt"),
                          (tmp_path / "latin1.txt", r"not UTF-8 text \(byte 9\)")):  # fmt: skip
        with pytest.raises(BertJaxError, match=f"--vocab_file={re.escape(str(path))}: {message}"):
            given_vocab.check(str(path))


def test_sentencepiece_model_becomes_a_wordpiece_vocab(tmp_path):
    from bert_jax.tokenization.vocab_builder import build_vocab
    from bert_jax.tokenization.wordpiece import FullTokenizer

    docs = _documents(200)
    corpus = _write_files(docs, tmp_path / "text", files=1)
    build_vocab(corpus, 600, tmp_path / "built", num_threads=1)
    tokens = given_vocab.tokens(str(tmp_path / "built" / "spm.model"))
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(tokens) == len(set(tokens)) > 300
    (tmp_path / "v.txt").write_text("".join(t + "\n" for t in tokens))
    tokenizer = FullTokenizer(tmp_path / "v.txt")
    ids = tokenizer.encode_batch([line for doc in docs[:50] for line in doc])
    pieces = sum(map(len, ids))
    assert sum(x.count(tokenizer.unk_id) for x in ids) < 0.01 * pieces
    with pytest.raises(BertJaxError, match=r"--vocab_file=\S+v\.model: not a sentencepiece"):
        (tmp_path / "v.model").write_bytes(b"not a model")
        given_vocab.check(str(tmp_path / "v.model"))


def test_runaway_lines_are_cut_or_refused(tmp_path, monkeypatch):
    """A line that outgrows LONG_LINE_BYTES while no newline has come (read in chunks) becomes
    several at spaces, so memory stays bounded; one with no space in that length is refused,
    naming the file and byte."""
    monkeypatch.setattr(corpus_split, "LONG_LINE_BYTES", 64)
    words = " ".join(f"word{i}" for i in range(100))  # 589 bytes, the file's last line
    (tmp_path / "long.txt").write_text(f"First line.\n{words}")
    (doc,) = corpus_split.iter_documents(str(tmp_path / "long.txt"))
    assert doc[0] == "First line." and " ".join(doc[1:]) == words
    assert len(doc) > 9 and all(len(x) <= 64 for x in doc)
    (tmp_path / "blob.txt").write_text("First line.\n" + "x" * 200)
    with pytest.raises(BertJaxError, match=r"blob\.txt: 64 bytes without a newline or a space "
                                           r"after byte 12"):  # fmt: skip
        list(corpus_split.iter_documents(str(tmp_path / "blob.txt")))
