"""An ablation workdir's shared data, built once and kept: the corpus split, the vocab, the
shards per pairing, the built-in suite and the slices of train the rates are chosen on; and the
settings its runs were made with (a workdir made with others is refused).

  data/          corpus split (train.txt, eval.txt; from a --corpus also held_out.txt, the
                 vocab's sample vocab_sample.txt and split.json), vocab/, shards per pairing
  suite/         the built-in downstream tasks (bert_jax.ablations.suite), unless --task is given
  lr_slices/     each task's train re-split to choose rates on (bert_jax.ablations.lr_choice)
  settings.json  the scale's unkeyed fields, the corpus, the --task data, the suite's version
  .data.lock     held while data/ or suite/ is built, so sweeps sharing the workdir build once

bert_jax.ablations.harness.Harness runs a table's arms on top of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable, Iterator

from etils import epath

from bert_jax import objectives
from bert_jax.ablations import corpus_split, given_vocab, provenance, suite
from bert_jax.ablations.inputs import check_task_dir, documents_within, write_docs
from bert_jax.ablations.scales import Scale
from bert_jax.atomic_write import is_local, write_json_atomic
from bert_jax.corpus import embedded
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.errors import BertJaxError
from bert_jax.tokenization.vocab_builder import build_vocab

# Held out of the embedded default: one document in five (a tenth before suite v3), for the cpu
# suite's 2000 dev examples. A --corpus is split by hash (corpus_split), the held-out sample
# sized by SUITE_BYTES_PER_EXAMPLE: the cpu suite's 1.7 MB of held-out text gave at least 1914
# examples of each kind per split from its half of the documents (about 440 bytes each), so
# 1000 bytes per example of the larger split, on each half, leaves a margin.
HELD_OUT_EVERY = 5
SUITE_BYTES_PER_EXAMPLE = 1000
# A trained vocab learns from at most this much of a --corpus's training text (a hash sample):
# sentencepiece reads at most 1M sentences of it anyway (vocab_builder's input_sentence_size).
VOCAB_SAMPLE_BYTES = 100 << 20
# Scale fields that are part of each run's directory name (or chosen per table): free to differ.
_KEYED = ("name", "model", "steps", "seeds", "pretrain_seeds", "sizes", "finetune_epochs",
          "finetune_lr", "finetune_lrs", "finetune_dropout", "warn_repetition",
          "max_repetition", "task_epochs")  # fmt: skip


def shared_settings(scale: Scale) -> dict:
    """The scale's fields a workdir records on first use and holds every later run to: all but
    those its finished runs are keyed by (`_KEYED`). Scales equal here can share a workdir."""
    return {k: v for k, v in dataclasses.asdict(scale).items() if k not in _KEYED}


def shard_objective(objective: str) -> str:
    """The create-pretraining-data objective whose shards (without masks) serve `objective`:
    sentence pairs (nsp), swapped pairs (sop) or packed full sentences (MLM-only, ELECTRA)."""
    pairing = objectives.get(objective).pairing
    return {"swapped_pairs": "sop", "packed": "full_sentences"}.get(pairing, "nsp")


@dataclasses.dataclass
class Workdir:
    workdir: str
    scale: Scale
    corpus: str = ""  # create-pretraining-data's sources, comma-separated; "" = embedded
    tasks: dict[str, str] = dataclasses.field(default_factory=dict)  # kind -> user data dir
    progress: Callable[[str], None] = print
    vocab: str = ""  # a WordPiece vocab.txt or sentencepiece .model to use; "" = train one

    def __post_init__(self) -> None:
        self.root = epath.Path(self.workdir)
        self.root.mkdir(parents=True, exist_ok=True)
        self._digests: dict | None = None
        self._embedded: tuple[list[list[str]], list[list[str]]] | None = None
        self._building_depth = 0
        # Inputs are checked before settings.json records them (a typo recorded there would
        # refuse the corrected command) and before any arm starts.
        for kind, directory in self.tasks.items():
            check_task_dir(kind, directory)
        if self.corpus and not (self.root / "data" / "eval.txt").exists():
            corpus_split.check(self.corpus)  # matches nothing, not UTF-8, too few documents
        if self.vocab:
            given_vocab.check(self.vocab)
        self._check_settings()

    @contextlib.contextmanager
    def _building(self) -> Iterator[None]:
        """The shared data (corpus split, vocab, shards, suite) is built by one process at a
        time: a second `bert-jax ablate` on this workdir waits here, then finds it built. An
        flock on local workdirs (the kernel drops it if the holder dies); re-entrant, since
        the shards need the vocab."""
        with contextlib.ExitStack() as stack:
            if not self._building_depth and is_local(self.root):
                import fcntl

                lock = stack.enter_context(open(self.root / ".data.lock", "a"))
                fcntl.flock(lock, fcntl.LOCK_EX)
            self._building_depth += 1
            try:
                yield
            finally:
                self._building_depth -= 1

    def _build_once(self, marker: epath.Path, build: Callable[[], None]) -> None:
        """`build()` unless `marker` (written last by it) exists, looked at again under the
        data lock, so a sweep that waited there does not build it a second time."""
        if marker.exists():
            return
        with self._building():
            if not marker.exists():
                build()

    def _check_settings(self) -> None:
        """Finished runs are keyed by objective, model, steps, mix, task, fine-tuning budget and
        seed only: the rest of the scale, the corpus, the --task data and the built-in suite's
        construction (`suite.VERSION`) are recorded on first use, and a workdir made with other
        values is refused rather than mixed into the new tables."""
        now = shared_settings(self.scale)
        extra = {"corpus": self.corpus, "tasks": self.tasks, "suite_version": suite.VERSION}
        if self.vocab:  # (absent when trained, so workdirs made before the flag still match)
            extra["vocab_file"] = given_vocab.fingerprint(self.vocab)
        now = json.loads(json.dumps({**now, **extra}))
        path = self.root / "settings.json"
        if not path.exists():
            write_json_atomic(path, now, sort_keys=True)
            return
        before = {k: v for k, v in json.loads(path.read_text()).items() if k not in _KEYED}
        changed = sorted(k for k in now.keys() | before.keys() if now.get(k) != before.get(k))
        if changed:
            diff = ", ".join(f"{k}={before.get(k)!r} (now {now.get(k)!r})" for k in changed)
            raise BertJaxError(
                f"{path}: this workdir's runs were made with {diff}; use another --workdir "
                "(or the earlier settings) so the tables do not mix the two"
            )

    def digests(self) -> dict:
        """What every run here shares, as digests (provenance.shared), building the corpus
        split and suite first if need be: computed once, as that data is built once and kept."""
        if self._digests is None:
            train, _ = self._corpus_split()
            self.task_dir("sst2")  # builds the suite (every built-in kind) once
            kinds = ("sst2", "mrpc", "mnli", "conll", "squad")
            dirs = {k: epath.Path(self.task_dir(k)) for k in kinds}
            settings = json.loads((self.root / "settings.json").read_text())
            self._digests = provenance.shared(
                settings, train, {k: d for k, d in dirs.items() if d.exists()}
            )
        return self._digests

    # ---- data --------------------------------------------------------------------------------
    def _corpus_split(self) -> tuple[epath.Path, epath.Path]:
        """The pretraining text and the held-out pretraining text (the first tenth of
        `corpus_bytes`, or 300 KB when the scale reads the whole corpus); the held-out
        documents also make the built-in suite. The embedded default holds out every
        `HELD_OUT_EVERY`-th document; a --corpus a sample by hash, streamed (corpus_split)."""
        data = self.root / "data"
        train, held = data / "train.txt", data / "eval.txt"
        size = self.scale.corpus_bytes
        eval_bytes = max(size // 10, 20_000) if size else 300_000

        def split() -> None:
            data.mkdir(parents=True, exist_ok=True)
            if self.corpus:
                self.progress(f"splitting --corpus {self.corpus} (two passes over it)")
                # train and dev examples come from alternate documents: each half must hold
                # the larger split's examples
                examples = 2 * max(self.scale.suite_train, self.scale.suite_dev)
                corpus_split.split(
                    self.corpus, data, eval_bytes + SUITE_BYTES_PER_EXAMPLE * examples,
                    eval_bytes, train_bytes=size, vocab_bytes=VOCAB_SAMPLE_BYTES,
                )  # fmt: skip
                return
            held_out, rest = self._embedded_split()
            write_docs(rest, train, size)
            write_docs(held_out, held, eval_bytes)

        self._build_once(held, split)
        return train, held

    def _embedded_split(self) -> tuple[list[list[str]], list[list[str]]]:
        if self._embedded is None:  # read once (the split and the suite both need it)
            docs = list(embedded.iter_documents())
            rest = [d for i, d in enumerate(docs) if i % HELD_OUT_EVERY]
            self._embedded = docs[::HELD_OUT_EVERY], rest
        return self._embedded

    def _suite_documents(self) -> list[list[str]]:
        """The held-out documents (of the embedded default, then those its pretraining text
        left out beyond the scale's `corpus_bytes`): no pretraining run reads a sentence the
        suite is built of."""
        if self.corpus:
            self._corpus_split()
            return corpus_split.read_held_out(self.root / "data")
        held_out, rest = self._embedded_split()
        return held_out + rest[documents_within(rest, self.scale.corpus_bytes) :]

    def vocab_file(self) -> str:
        """The workdir's WordPiece vocab: --vocab_file's (converted from a sentencepiece model
        if need be), or one trained on the pretraining text (a --corpus's bounded sample)."""
        out = self.root / "data" / "vocab"

        def vocab() -> None:
            if self.vocab:
                self.progress(f"using the vocab of {self.vocab}")
                given_vocab.install(self.vocab, out)
                return
            train, _ = self._corpus_split()
            threads = 1  # the embedded default's vocab, as it was made before
            if self.corpus:
                record = json.loads((self.root / "data" / "split.json").read_text())
                train, threads = self.root / "data" / record["vocab_from"], os.cpu_count() or 1
            self.progress(f"building a {self.scale.vocab_size}-token vocab on {train}")
            build_vocab(str(train), self.scale.vocab_size, out, num_threads=threads)

        self._build_once(out / "vocab_stats.json", vocab)
        return str(out / "vocab.txt")

    def shards(self, objective: str) -> tuple[str, str]:
        """(train, eval) shard globs for an objective's pairing, without static masks (masks are
        drawn at training time, so every masking mix reads the same shards)."""
        flag = shard_objective(objective)
        base = self.root / "data" / flag
        vocab = self.vocab_file()
        train, held = self._corpus_split()
        for split, text in (("train", train), ("eval", held)):

            def write(split: str = split, text: epath.Path = text) -> None:
                self.progress(f"writing {flag} {split} shards")
                create_pretraining_data(
                    str(text), str(base / split), vocab, objective=flag, dynamic_masking=True,
                    max_seq_length=self.scale.seq, max_predictions_per_seq=self.scale.predictions,
                    dupe_factor=self.scale.dupe_factor if split == "train" else 1,
                )  # fmt: skip

            self._build_once(base / split / "stats.json", write)
        return str(base / "train" / "shard-*.tfrecord"), str(base / "eval" / "shard-*.tfrecord")

    def task_dir(self, kind: str) -> str:
        if kind in self.tasks:
            return self.tasks[kind]
        out = self.root / "suite"

        def build() -> None:
            self.progress("building the downstream suite from held-out documents")
            counts = suite.build_suite(
                self._suite_documents(), str(out), self.scale.suite_train, self.scale.suite_dev
            )
            write_json_atomic(out / "counts.json", counts, sort_keys=True)

        self._build_once(out / "counts.json", build)
        return str(out / kind)

    def train_slice(self, kind: str) -> str:
        """`kind`'s data re-split: the first 80% of its train as train, the rest as dev."""
        from bert_jax.ablations.lr_choice import write_train_slice

        out = self.root / "lr_slices" / kind

        def build() -> None:
            sizes = write_train_slice(kind, self.task_dir(kind), str(out))
            write_json_atomic(out / "slice.json", sizes, sort_keys=True)

        self._build_once(out / "slice.json", build)
        return str(out)
