"""Adding an architecture is one folder plus one line in each registry: tests/toy_arch/ (a
bag-of-context encoder and its masked-LM objective, shipped nowhere) is registered the way
`_BUILT` registers the package's own, and from there the shared code pretrains it, counts its
FLOPs, lists it in the README's families table and refuses what it has not built, by its name,
without a line of it knowing the toy."""

from __future__ import annotations

import pathlib
import sys

import pytest

from bert_jax import objectives
from bert_jax.arch import registry, table
from bert_jax.corpus import snapshot
from bert_jax.data.pipeline import create_pretraining_data
from bert_jax.errors import BertJaxError
from bert_jax.train.config import pretrain_config

sys.path.insert(0, str(pathlib.Path(__file__).parent))  # tests/ holds the toy's folder

SEQ, PRED, STEPS = 64, 10, 150


@pytest.fixture(scope="module")
def toy():
    from toy_arch.family import ToyFamily
    from toy_arch.objective import OBJECTIVE

    objectives.register(OBJECTIVE)  # the objectives registry's line
    registry.register(ToyFamily())  # the architectures registry's line
    yield registry.get("toy")
    registry.unregister("toy")
    objectives.unregister(OBJECTIVE.name)


def test_the_registry_finds_it_and_its_table_row_says_what_it_does(toy):
    assert registry.for_objective("toy_mlm") is toy
    row = next(line for line in table.render().splitlines() if line.startswith("| `toy` "))
    assert "objectives toy_mlm" in row and "the toy has no task heads" in row
    with pytest.raises(BertJaxError, match="already registered"):
        registry.register(toy)


def test_it_pretrains_through_the_shared_run(toy, tmp_path):
    """Real shards of the corpus snapshot, the one loop, its own model and FLOPs formula: the
    held-out masked-LM loss falls from the uniform guess's ln(V) to below the unigram rate's
    entropy neighbourhood, which a model the loop did not train could not reach."""
    import math

    from bert_jax.runs.pretrain import run_pretraining
    from bert_jax.tokenization.vocab_builder import build_vocab

    snapshot.write_corpus(tmp_path / "corpus.txt", max_bytes=200_000)
    docs = (tmp_path / "corpus.txt").read_text().strip().split("\n\n")
    (tmp_path / "train.txt").write_text("\n\n".join(docs[:-10]) + "\n")
    (tmp_path / "eval.txt").write_text("\n\n".join(docs[-10:]) + "\n")
    build_vocab(str(tmp_path / "train.txt"), 1000, tmp_path, num_threads=1)
    vocab = str(tmp_path / "vocab.txt")
    for split in ("train", "eval"):
        create_pretraining_data(str(tmp_path / f"{split}.txt"), str(tmp_path / split), vocab,
                                max_seq_length=SEQ, max_predictions_per_seq=PRED,
                                objective="mlm", dupe_factor=2)  # fmt: skip
    c = pretrain_config("tiny")
    c.update(dict(
        objective="toy_mlm", dtype="float32", vocab_file=vocab, global_batch_size=32,
        train_files=str(tmp_path / "train" / "*.tfrecord"),
        eval_files=str(tmp_path / "eval" / "*.tfrecord"), max_seq_length=SEQ,
        max_predictions_per_seq=PRED, learning_rate=5e-3, schedule="constant", warmup_steps=0,
        train_steps=STEPS, eval_every_steps=STEPS, checkpoint_every_steps=STEPS,
        log_every_steps=50, max_eval_steps=10,
    ))  # fmt: skip
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 1, 1
    result = run_pretraining(c, str(tmp_path / "workdir"))
    assert result.trainer.task.family is toy
    assert type(result.trainer.task.model).__name__ == "BagOfContextLM"
    loss = result.last_eval["eval_masked_lm_loss"]
    vocab_size = result.trainer.task.bert_config.vocab_size
    print(f"toy: held-out masked-LM loss {loss:.3f} after {STEPS} steps (uniform "
          f"{math.log(vocab_size):.3f})")  # fmt: skip
    assert loss < math.log(vocab_size) - 1.0
    assert result.last_metrics["mfu"] > 0  # its FLOPs formula, through the protocol


def test_what_it_has_not_built_is_refused_by_its_name(toy):
    with pytest.raises(BertJaxError, match="fine-tuning: not built for the bag-of-context toy"):
        toy.load_for_finetuning(None)
