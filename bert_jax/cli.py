"""The `bert-jax` command: dispatches `bert-jax <subcommand> [flags]` to bert_jax.commands.<name>.

Each subcommand module defines its own absl flags and a `main(argv)`; only the chosen module is
imported, so flag names (which mirror the reference scripts) never collide between subcommands.
"""

from __future__ import annotations

import importlib
import sys

from bert_jax.errors import BertJaxError

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "corpus -> vocab -> shards -> tiny pretraining -> embeddings, no download"),
    "build-vocab": ("build_vocab", "train a WordPiece vocab.txt and a sentencepiece model"),
    "create-pretraining-data": (
        "create_pretraining_data",
        "raw text -> TFRecord pretraining shards (reference flags and schema)",
    ),
    "pretrain": ("pretrain", "sharded pretraining from TFRecord shards"),
    "finetune": ("finetune", "fine-tune and evaluate on GLUE, SQuAD, CoNLL-2003 NER, SWAG"),
    "extract-features": ("extract_features", "contextual embeddings as JSON lines (reference)"),
    "attention-map": ("attention_map", "PNG heatmap of one layer and head for a sentence"),
    "convert": ("convert", "Hugging Face dir or Google TF checkpoint -> Hugging Face dir"),
    "compile": ("compile", "ahead-of-time compile the train step for a TPU topology"),
    "ablate": ("ablate", "reproduce a BERT paper ablation table, every arm end to end"),
}


def _usage() -> str:
    lines = ["usage: bert-jax <subcommand> [--flag=value ...]", "", "subcommands:"]
    lines += [f"  {name:<26}{help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    lines.append("\n`bert-jax <subcommand> --helpfull` lists a subcommand's flags.")
    return "\n".join(lines)


def _show_causes(e: BaseException) -> None:
    """`raise BertJaxError(...) from None` keeps the one-line message free of the exception it
    explains; under --verbose that exception is wanted, so un-hide it along the chain."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__suppress_context__ = False
        e = e.__cause__ or e.__context__


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
        print(_usage())
        sys.exit(0 if len(argv) >= 2 else 2)
    name = argv[1]
    if name not in SUBCOMMANDS:
        print(f"bert-jax: error: unknown subcommand {name!r}\n\n{_usage()}", file=sys.stderr)
        sys.exit(2)
    verbose = "--verbose" in argv
    rest = [a for a in argv[2:] if a != "--verbose"]
    module = importlib.import_module(f"bert_jax.commands.{SUBCOMMANDS[name][0]}")
    from absl import app

    def run(absl_argv: list[str]) -> None:
        try:
            module.main(absl_argv)
        except BertJaxError as e:
            if verbose:
                _show_causes(e)
                raise
            print(f"bert-jax: error: {e}", file=sys.stderr)
            sys.exit(2)

    app.run(run, argv=[f"bert-jax {name}", *rest])


if __name__ == "__main__":
    main()
