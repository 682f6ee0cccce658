"""The `bert-jax` command: dispatches `bert-jax <subcommand> [flags]` to bert_jax.commands.<name>.

Each subcommand module defines its own absl flags and a `main(argv)`; only the chosen module is
imported, so flag names (which mirror the reference scripts) never collide between subcommands.
"""

from __future__ import annotations

import importlib
import re
import signal
import sys

from bert_jax import config_files, quiet
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
    "distill-data": (
        "distill_data",
        "a fine-tuned teacher labels task and transfer text -> TFRecord shards",
    ),
    "extract-features": ("extract_features", "contextual embeddings as JSON lines (reference)"),
    "attention-map": ("attention_map", "PNG heatmap of one layer and head for a sentence"),
    "convert": ("convert", "Hugging Face dir or Google TF checkpoint -> Hugging Face dir"),
    "generate": ("generate", "decode with an encoder-decoder (greedy, beam, sampling)"),
    "compile": ("compile", "ahead-of-time compile the train step for a TPU topology"),
    "ablate": ("ablate", "reproduce a BERT paper ablation table, every arm end to end"),
}


def _usage() -> str:
    lines = ["usage: bert-jax <subcommand> [--flag=value ...]", "", "subcommands:"]
    lines += [f"  {name:<26}{help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    lines.append("\n`bert-jax <subcommand> --help` lists a subcommand's flags and config fields.")
    return "\n".join(lines)


def _show_causes(e: BaseException) -> None:
    """`raise BertJaxError(...) from None` keeps the one-line message free of the exception it
    explains; under --verbose that exception is wanted, so un-hide it along the chain."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__suppress_context__ = False
        e = e.__cause__ or e.__context__


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _interrupt_on_sigint() -> None:
    """Ctrl-C raises KeyboardInterrupt wherever the main thread is. Python's own handler does
    too, but asyncio.run (Orbax saves a checkpoint through it) replaces that one handler while
    it runs with one that cancels its task, and a task that finishes anyway loses the interrupt:
    an ablation went on to the end. A handler of our own is left alone by asyncio."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not SIG_IGN (nohup)
        signal.signal(signal.SIGINT, _raise_interrupt)


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
    try:
        if any(a in ("-h", "--help", "-help", "--helpshort") for a in rest):
            from bert_jax.cli_help import subcommand_help

            print(subcommand_help(name, SUBCOMMANDS[name][1], module, rest))
            sys.exit(0)
        rest = config_files.resolve_argv(rest)  # --config=NAME.py from any directory
        quiet.cpu_only_platform(name, rest)  # before JAX loads: no libtpu probing on a CPU
    except BertJaxError as e:
        if verbose:
            raise
        print(f"bert-jax: error: {e}", file=sys.stderr)
        sys.exit(2)
    from absl import app

    started = []  # set once flags are parsed: later errors are the command's own

    def run(absl_argv: list[str]) -> None:
        started.append(True)
        quiet.quiet_logs(rest)
        _interrupt_on_sigint()
        if not verbose:
            from bert_jax import save_noise

            save_noise.install()  # a failed async checkpoint save: our one line, not 1,100
        try:
            module.main(absl_argv)
        except BertJaxError as e:
            if verbose:
                _show_causes(e)
                raise
            print(f"bert-jax: error: {e}", file=sys.stderr)
            sys.exit(2)
        except KeyboardInterrupt:  # Ctrl-C: every output is written whole or not at all
            if verbose:
                raise
            print(f"bert-jax: {name} interrupted (SIGINT); what it finished is kept: rerun the "
                  "same command to go on", file=sys.stderr)  # fmt: skip
            sys.exit(130)

    def parse_flags(absl_argv: list[str]) -> list[str]:
        from absl import flags

        try:
            return flags.FLAGS(absl_argv)
        except flags.Error as e:  # absl's own: two lines naming --helpfull, exit 1
            if verbose:
                raise
            message = "; ".join(x.strip() for x in str(e).splitlines() if x.strip())
            message += f" (bert-jax {name} --help lists the flags)"
            if "Error whilst parsing config file" in str(e):  # get_config raised: its last line
                last = str(e).strip().splitlines()[-1].strip()
                message = f"--config: {re.sub(r'^(ValueError|BertJaxError|KeyError): ', '', last)}"
                if "get_config() takes 0 positional" in last:
                    message = "--config: this config file takes no :<preset> argument"
            print(f"bert-jax: error: {message}", file=sys.stderr)
            sys.exit(2)

    try:
        app.run(run, argv=[f"bert-jax {name}", *rest], flags_parser=parse_flags)
    except Exception as e:  # raised while parsing flags (a config file is run at parse time)
        if started or verbose:
            raise
        print(f"bert-jax: error: {_flag_error(e, rest)}", file=sys.stderr)
        sys.exit(2)


def _flag_error(e: Exception, args: list[str]) -> str:
    """One line for an error met while absl parsed the flags, naming the flag or file."""
    if isinstance(e, SyntaxError):
        return f"{e.filename}:{e.lineno}: --config file is not valid Python ({e.msg})"
    if isinstance(e, (AttributeError, KeyError)):
        text = str(e)
        flags_ = [a.split("=")[0] for a in args if a.startswith("--config.")]
        flag = next((f for f in flags_ if f"'{f.rsplit('.', 1)[1]}" in text), None)
        if flag:
            key = flag.rsplit(".", 1)[1]
            renamed = _renamed_key(flag, args)
            if renamed:
                return renamed
            hint = re.search(r'Did you mean "([^"]+)"', text)
            more = f"did you mean {hint.group(1)!r}?" if hint else "see --help for the fields"
            return f"{flag}: the config has no field {key!r} ({more})"
    config = next((a for a in args if a.startswith("--config")), "--config")
    if isinstance(e, BertJaxError):  # a config file's own check (an unknown preset, say)
        return f"--config: {e}"
    return f"{config}: {type(e).__name__}: {e}"


def _renamed_key(flag: str, args: list[str]) -> str | None:
    """The one line for a fine-tuning key that was renamed (`--config.family=glue`: task_family),
    when the config given has the new key (t5.py has neither: its message stays the general one)."""
    from bert_jax.task_family_key import RENAMED_KEYS, renamed_key_message

    old = flag.removeprefix("--config.")
    given = config_files.config_value(args)
    if old not in RENAMED_KEYS or given is None:
        return None
    from bert_jax.cli_help import load_config

    try:
        has_new = RENAMED_KEYS[old] in load_config(given)
    except Exception:  # the config file's own error is reported where it is read
        return None
    return renamed_key_message(old, flag) if has_new else None


if __name__ == "__main__":
    main()
