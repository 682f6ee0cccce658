"""`bert-jax <subcommand> --help`: the subcommand's own flags and, for subcommands with a
`--config`, every `--config.<key>` with its default and meaning. The meanings are the comments
beside (or the comment block above) each key in bert_jax/train/config.py and in the config file,
so the help says what the code says."""

from __future__ import annotations

import importlib.util
import inspect
import io
import re
import textwrap
import tokenize
from types import ModuleType
from typing import Any

from absl import flags

from bert_jax import config_files

# The config whose fields `--help` lists when no --config is given.
DEFAULT_CONFIGS = {
    "pretrain": "pretrain.py",
    "compile": "pretrain.py",
    "finetune": "glue.py",
    "distill-data": "glue.py",
}
# Fine-tuning: the other task families' configs add their own keys.
_FAMILY_CONFIGS = ("squad.py", "ner.py", "swag.py")
_KEY = re.compile(r"^\s*c\.([\w.]+)\s*=(?!=)")
_DICT_KEY = re.compile(r'"(\w+)":')
_LOOP_KEYS = re.compile(r"^\s*for \w+ in \(")  # `for key in ("d_model", ...): c[key] = ...`
_STATEMENT = re.compile(r"^\s*(for|if|elif|else|while|with|return|def|try)\b")


def _block_doc(block: list[str], key: str, first: bool) -> str:
    """A key's meaning from the comment block above its group: the clause that names the key,
    else the block's first clause when the key opens the group and that clause is not a heading,
    else nothing. A heading ("Bookkeeping (bert_jax.train.loop).") names a section, not what a
    key does, and a block written for one key (e.g. layerwise_lr_decay's) says nothing about the
    keys after it: such keys need their own comment (tests/test_faults_misc.py checks that
    every listed key has one)."""
    clauses = " ".join(block).split("; ")
    name = key.rsplit(".", 1)[-1]
    named = [c for c in clauses if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", c)]
    if named:
        return named[0]
    heading = ": " not in clauses[0]  # "Heading: detail" is the detail of the key it opens
    return clauses[0] if first and not heading else ""


def field_docs(source: str) -> dict[str, str]:
    """key -> meaning, from `c.key = value  # meaning` lines and from the comment block above a
    group of lines (also the `"key": value` entries of a dict under such a block)."""
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    docs: dict[str, str] = {}
    block: list[str] = []
    after_comment = False
    family = ""
    first = True  # no key line yet under the current block
    for n, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            block, after_comment, family = [], False, ""
            continue
        if stripped.startswith("#"):  # a new block, or the next line of the one above
            block = [*block, comments.get(n, "")] if after_comment else [comments.get(n, "")]
            after_comment, first = True, True
            continue
        after_comment = False
        trailing = comments.get(n, "")
        trailing = "" if trailing.startswith(("noqa", "fmt:", "type:")) else trailing
        match = _KEY.match(line)
        keys = [match.group(1)] if match else []
        if _LOOP_KEYS.match(line) and block:
            keys = re.findall(r'"(\w+)"', stripped)
        elif not keys and block:
            found = _DICT_KEY.findall(stripped)
            if re.match(r'"\w+":\s*\{', stripped):  # `"squad": {`: the keys after are its own
                family, found = found[0], found[1:]
            keys = found
        for key in keys:
            doc = trailing or (_block_doc(block, key, first) if block else "")
            if doc and not match and family:
                docs[f"{family}/{key}"] = doc  # a family's own key ("squad/strict")
            elif doc:
                docs.setdefault(key, doc)
        first = first and not keys
        if _STATEMENT.match(line):  # a loop or branch ends the group the block heads
            block = []
    return docs


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if hasattr(v, "items") and v.__class__.__name__ in ("ConfigDict", "dict"):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _load(value: str) -> tuple[Any, str]:
    """(config, its file's source) for a --config value."""
    path, _, arg = config_files.resolve(value).partition(":")
    spec = importlib.util.spec_from_file_location("bert_jax_help_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.get_config(arg) if arg else module.get_config()
    return config, inspect.getsource(module)


def load_config(value: str) -> Any:
    """The config a --config value names (its file's get_config with the value's argument)."""
    return _load(value)[0]


def _fmt_value(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _meaning(config: Any, docs: dict[str, str], key: str) -> str:
    """A key's meaning: its task family's own ("squad/strict"), else the key's, else (mesh.data)
    its parent's."""
    family = f"{config.get('task_family', '')}/{key}"
    return docs.get(family) or docs.get(key) or docs.get(key.split(".")[0], "")


def _fields(config: Any, docs: dict[str, str], only: set[str] | None = None) -> list[str]:
    lines = []
    for key, value in _flatten(config).items():
        if only is not None and key not in only:
            continue
        doc = _meaning(config, docs, key)
        head = f"  --config.{key}={_fmt_value(value)}"
        body = textwrap.wrap(doc, 96 - 8) if doc else []
        if body and len(head) < 46:
            lines.append(f"{head:<46}{body[0]}")
            body = body[1:]
        else:
            lines.append(head)
        lines += [" " * 8 + b for b in body]
    return lines


def _config_and_docs(name: str) -> tuple[Any, dict[str, str]]:
    """A config by name and the meanings of its keys (the schema's comments, then its file's)."""
    from bert_jax.train import config as schema

    base_docs = field_docs(inspect.getsource(schema))
    config, source = _load(name)
    if "train_batch_size" in config:  # a fine-tuning config: its schema's meanings come first
        for part in (schema.training_config, schema.finetune_config):
            base_docs.update(field_docs(inspect.getsource(part)))
    return config, {**base_docs, **field_docs(source)}


def config_meanings(name: str) -> dict[str, str]:
    """--config.<key> -> the meaning `--help` shows for it, for the config `name`."""
    config, docs = _config_and_docs(name)
    return {key: _meaning(config, docs, key) for key in _flatten(config)}


def config_help(subcommand: str, args: list[str]) -> list[str]:
    given = next((a.split("=", 1)[1] for a in args if a.startswith("--config=")), None)
    if given is None and "--config" in args and args.index("--config") + 1 < len(args):
        given = args[args.index("--config") + 1]
    name = given or DEFAULT_CONFIGS.get(subcommand)
    if name is None:
        return ["", "config fields: give --config=FILE --help to list that config's fields"]
    config, docs = _config_and_docs(name)
    lines = [
        "",
        f"config fields of {name} (--config.<key>=value overrides one; configs by name: "
        f"{', '.join(config_files.known_configs())}):",
        *_fields(config, docs),
    ]
    if subcommand == "finetune" and given is None:
        for other in _FAMILY_CONFIGS:
            other_config, other_source = _load(other)
            extra = set(_flatten(other_config)) - set(_flatten(config))
            lines += ["", f"{other} adds:", *_fields(other_config, docs | field_docs(other_source),
                                                     extra)]  # fmt: skip
    return lines


def subcommand_help(subcommand: str, summary: str, module: ModuleType, args: list[str]) -> str:
    """The text of `bert-jax <subcommand> --help` (`args`: the rest of the command line)."""
    lines = [f"usage: bert-jax {subcommand} [--flag=value ...]", "", summary]
    doc = inspect.getdoc(module)
    if doc:
        lines += ["", doc]
    lines += ["", "flags:"]
    own = flags.FLAGS.get_flags_for_module(module.__name__)
    for flag in sorted(own, key=lambda f: f.name):
        default = "" if flag.name == "config" else f" (default: {flag.default!r})"
        lines.append(f"  --{flag.name}: {flag.help}{default}")
    lines.append("  --verbose: a traceback instead of the one-line error")
    if any(f.name == "config" for f in own):
        lines += config_help(subcommand, args)
    return "\n".join(lines)
