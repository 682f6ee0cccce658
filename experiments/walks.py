"""The walk of a run's config through bert_jax: how many functions it stops at, how often it
climbs between folders, how often it is handed back. Numbers to report before and after a
refactor.

    PYTHONPATH=/work/main python experiments/walks.py [--scenario pretrain|finetune|ablate]
        [--list] [--workdir DIR] [--ablate_table nsp_sop] [--settings_regex RE]

The bert_jax traced is the first one on sys.path (PYTHONPATH): point PYTHONPATH at a
`git worktree` of an older commit to measure that commit with this same script. Nothing from
bert_jax is imported at module level; entry points are looked up at run time among a few import
paths (the one used is printed).

Prints the traced bert_jax directory and commit, each scenario's entry point, then one line per
scenario:

    scenario: stops E events / F functions, climbs E events / G edges,
        returns E events / H functions        (one line)

under it the same counts for ConfigDicts alone (settings objects left out), and with --list the
distinct functions, climb edges and returning functions, each with its events and how many of
them a ConfigDict made. A run of every scenario ends with the scenario lines again (`summary:`).

Definitions. Only the main thread is traced, with sys.settrace ('call' and 'return' events;
line events are switched off), and only frames whose code file lies under the traced bert_jax
package count. Only the scenario's entry call is traced; its setup (corpus, vocab, shards, the
config itself, the pretraining a fine-tuning starts from) is not.
- Tracked objects: every ml_collections ConfigDict (FrozenConfigDict included): the run's
  config, its sub-dicts (config.mesh, config.distill), copies and any ConfigDict the code builds
  on the way. Also instances of dataclasses defined in bert_jax whose `module.qualname` matches
  --settings_regex (default: class names ending in `Settings` outside bert_jax.data, e.g.
  train.settings.TrainSettings; data.blocks.Settings is the shard writer's, built from
  create_pretraining_data's arguments, not from a config). `--settings_regex ''` counts
  ConfigDicts only. A method of a tracked object's own class is not a stop because of `self`.
- Stop: a 'call' event of a bert_jax function (a generator's first entry only, not each
  resumption) one of whose arguments (the names in co_varnames[:co_argcount +
  co_kwonlyargcount], plus the contents of *args and **kwargs) is a tracked object. Events and
  distinct functions (module:qualname).
- Climb: a stop whose module's folder differs from that of its nearest bert_jax caller frame
  (the first bert_jax frame down the stack from it). A folder is the first name under
  bert_jax (bert_jax.arch.bert.heads -> arch, bert_jax.runs.pretrain -> runs; a top-level
  module is its own: bert_jax.config -> config).
  The entry call (no bert_jax caller) is never a climb. Events and distinct caller -> callee
  folder edges.
- Return: a 'return' event of a bert_jax function (generators' yields excluded) whose value is
  a tracked object or a tuple/list holding one. Events and distinct functions.

Scenarios (tiny, CPU; all by default):
- pretrain: 3 steps of an L1-H32-A2 BERT (batch 4, 64 tokens) on shards written by
  create_pretraining_data from the embedded corpus in a WordPiece vocab built here, evaluation
  and a checkpoint at step 3: traces run_pretraining(config, workdir).
- finetune: GLUE MRPC (tests/fixtures/tasks/glue/mrpc, 4 training pairs, batch 2: 2 steps)
  from the pretrain scenario's workdir (pretrained untraced when that scenario is not run):
  traces finetune(config, workdir).
- ablate: `bert-jax ablate --quick` of one table (--ablate_table, default nsp_sop: three
  16-step pretraining runs scored on held-out NSP and SOP pairs, no fine-tuning; the table is
  rendered, about 2 min): traces ablate(table, scale, workdir) after building the workdir's
  corpus split, vocab and shards untraced (the downstream suite it builds for the table's
  record is traced). No path assembles a table and meets a ConfigDict without training:
  rendering a finished table (report.rerender) passes none.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import dis
import importlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SCENARIOS = ("pretrain", "finetune", "ablate")
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
_RESUME = dis.opmap.get("RESUME")
SETTINGS_REGEX = r"^bert_jax\.(?!data\.).*Settings$"


@dataclasses.dataclass(frozen=True)
class _Code:
    """What the tracer needs of a bert_jax code object."""

    name: str  # module:qualname
    folder: str  # first name under bert_jax
    qualname: str
    args: tuple[str, ...]
    varargs: str | None
    varkw: str | None
    generator: bool


@dataclasses.dataclass
class Walk:
    """Counts of one traced call: stops, climbs and returns (see the module docstring)."""

    stops: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    climbs: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    returns: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def line(self, scenario: str) -> str:
        s, c, r = self.stops, self.climbs, self.returns
        return (f"{scenario}: stops {s.total()} events / {len(s)} functions, "
                f"climbs {c.total()} events / {len(c)} edges, "
                f"returns {r.total()} events / {len(r)} functions")  # fmt: skip

    def listing(self, configs: Walk) -> str:
        """Each function and edge with its events, and of those the ones a ConfigDict made."""
        out = ["  stops (events, of them with a ConfigDict argument; function):"]
        out += [f"    {n:6d} {configs.stops[f]:6d}  {f}" for f, n in sorted(self.stops.items())]
        out.append("  climbs (events, of them with a ConfigDict; caller folder -> callee folder):")
        out += [f"    {n:6d} {configs.climbs[e]:6d}  {e[0]} -> {e[1]}"
                for e, n in sorted(self.climbs.items())]  # fmt: skip
        out.append("  returns (events, of them of a ConfigDict; function):")
        out += [f"    {n:6d} {configs.returns[f]:6d}  {f}" for f, n in sorted(self.returns.items())]
        return "\n".join(out)


_CONFIG, _SETTINGS = 1, 2  # what a value is: a ConfigDict, a settings dataclass (0: neither)


class Tracer:
    """sys.settrace hooks counting the walk over the bert_jax package at `root`: `walk` of
    every tracked object, `configs` of the ConfigDicts alone."""

    def __init__(self, root: pathlib.Path, settings_regex: str) -> None:
        from ml_collections import ConfigDict

        self.root = str(root.resolve()) + os.sep
        self.config_type = ConfigDict
        self.settings = re.compile(settings_regex) if settings_regex else None
        self.walk, self.configs = Walk(), Walk()
        self._codes: dict[types.CodeType, _Code | None] = {}
        self._files: dict[str, str | None] = {}
        self._types: dict[type, int] = {}

    def _module(self, filename: str) -> str | None:
        if filename not in self._files:
            path = os.path.realpath(filename)
            module = None
            if path.startswith(self.root) and path.endswith(".py"):
                parts = path[len(self.root) : -3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                module = ".".join(["bert_jax", *parts])
            self._files[filename] = module
        return self._files[filename]

    def _code(self, code: types.CodeType) -> _Code | None:
        if code not in self._codes:
            module = self._module(code.co_filename)
            info = None
            if module is not None:
                n = code.co_argcount + code.co_kwonlyargcount
                names = code.co_varnames
                varargs = names[n] if code.co_flags & 0x04 else None  # CO_VARARGS
                varkw = names[n + bool(varargs)] if code.co_flags & 0x08 else None  # CO_VARKEYWORDS
                qualname = getattr(code, "co_qualname", code.co_name)
                folder = module.split(".")[1] if "." in module else "bert_jax"
                info = _Code(f"{module}:{qualname}", folder, qualname, names[:n], varargs, varkw,
                             bool(code.co_flags & _GENERATOR_FLAGS))  # fmt: skip
            self._codes[code] = info
        return self._codes[code]

    def kind(self, value: Any) -> int:
        """_CONFIG, _SETTINGS or 0."""
        cls = type(value)
        if cls not in self._types:
            name = f"{cls.__module__}.{cls.__qualname__}"
            if issubclass(cls, self.config_type):
                self._types[cls] = _CONFIG
            elif self.settings and dataclasses.is_dataclass(cls) and self.settings.search(name):
                self._types[cls] = _SETTINGS
            else:
                self._types[cls] = 0
        return self._types[cls]

    def _held(self, value: Any) -> int:
        """The kinds of `value` and, a tuple or list, of its items."""
        kinds = self.kind(value)
        if isinstance(value, (tuple, list)):
            for item in value:
                kinds |= self.kind(item)
        return kinds

    def _arguments(self, frame: types.FrameType, info: _Code) -> int:
        """The kinds of the call's arguments."""
        if not (info.args or info.varargs or info.varkw):
            return 0
        local, kinds = frame.f_locals, 0
        for i, name in enumerate(info.args):
            value = local.get(name)
            kind = self.kind(value)
            if kind and not (i == 0 and info.qualname.startswith(type(value).__qualname__ + ".")):
                kinds |= kind  # not the `self` of the tracked object's own method
        for item in local.get(info.varargs, ()) if info.varargs else ():
            kinds |= self.kind(item)
        for item in local.get(info.varkw, {}).values() if info.varkw else ():
            kinds |= self.kind(item)
        return kinds

    def _first_entry(self, frame: types.FrameType, info: _Code) -> bool:
        """False for a generator's resumption (its frame restarts at RESUME with oparg > 0)."""
        if not info.generator or _RESUME is None:
            return True
        code, at = frame.f_code.co_code, frame.f_lasti
        return not (0 <= at < len(code) - 1 and code[at] == _RESUME and code[at + 1] != 0)

    def _on_call(self, frame: types.FrameType, info: _Code) -> None:
        if not self._first_entry(frame, info):
            return
        kinds = self._arguments(frame, info)
        if not kinds:
            return
        walks = [self.walk, self.configs] if kinds & _CONFIG else [self.walk]
        caller = frame.f_back
        while caller is not None and self._code(caller.f_code) is None:
            caller = caller.f_back
        below = None if caller is None else self._code(caller.f_code)
        for walk in walks:
            walk.stops[info.name] += 1
            if below is not None and below.folder != info.folder:
                walk.climbs[(below.folder, info.folder)] += 1

    def _local(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            info = self._code(frame.f_code)
            kinds = 0 if info is None or info.generator else self._held(arg)
            if kinds:
                self.walk.returns[info.name] += 1
            if kinds & _CONFIG:
                self.configs.returns[info.name] += 1
        return self._local

    def _global(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        info = self._code(frame.f_code)
        if info is None:
            return None
        frame.f_trace_lines = False
        self._on_call(frame, info)
        return self._local

    def run(self, fn: Callable[[], Any]) -> Any:
        sys.settrace(self._global)
        try:
            return fn()
        finally:
            sys.settrace(None)


# ---------------------------------------------------------------- entry points and setup


def find(what: str, candidates: list[tuple[str, str]], said: list[str]) -> Callable[..., Any]:
    """The first `module:attr` of `candidates` that imports; its name is noted in `said`."""
    tried = []
    for module, attr in candidates:
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            tried.append(f"{module}:{attr} ({type(e).__name__})")
            continue
        moved = f" (not at {', '.join(tried)})" if tried else ""
        said.append(f"  {what}: {module}:{attr}{moved}")
        return fn
    raise SystemExit(f"walks: no {what} found; tried {', '.join(tried)}")


def _pretraining_entry(said: list[str]) -> Callable[..., Any]:
    where = ("bert_jax.runs.pretrain", "bert_jax.pretraining.run", "bert_jax.train.pretrain")
    return find("run_pretraining", [(m, "run_pretraining") for m in where], said)


def _shards(base: pathlib.Path, said: list[str]) -> tuple[pathlib.Path, pathlib.Path]:
    """(vocab.txt, shard folder) from the embedded corpus, made once under `base`."""
    vocab, shards = base / "vocab" / "vocab.txt", base / "shards"
    if not vocab.exists():
        from bert_jax.corpus import embedded

        build_vocab = find("build_vocab", [("bert_jax.tokenization", "build_vocab"),
                                           ("bert_jax.tokenization.vocab_builder",
                                            "build_vocab")], said)  # fmt: skip
        embedded.write_corpus(base / "corpus.txt", max_bytes=300_000)
        build_vocab([str(base / "corpus.txt")], 1000, base / "vocab")
    if not (shards / "stats.json").exists():
        create = find("create_pretraining_data",
                      [("bert_jax.data.pipeline", "create_pretraining_data")], said)  # fmt: skip
        create(str(base / "corpus.txt"), str(shards), str(vocab), max_seq_length=64,
               max_predictions_per_seq=10, dupe_factor=1)  # fmt: skip
    return vocab, shards


def _pretrain_config(base: pathlib.Path, said: list[str]) -> Any:
    vocab, shards = _shards(base, said)
    where = ("bert_jax.train.config", "bert_jax.config")
    pretrain_config = find("pretrain_config", [(m, "pretrain_config") for m in where], said)
    c = pretrain_config("L1-H32-A2")
    glob = str(shards / "shard-*.tfrecord")
    values = dict(
        dtype="float32", train_files=glob, eval_files=glob, vocab_file=str(vocab),
        max_seq_length=64, max_predictions_per_seq=10, global_batch_size=4,
        learning_rate=1e-3, schedule="constant", warmup_steps=0, train_steps=3,
        eval_every_steps=3, checkpoint_every_steps=3, max_eval_steps=1, log_every_steps=1,
        async_checkpoints=False, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    c.update({k: v for k, v in values.items() if k in c})
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 1, 1
    return c


def pretrain(base: pathlib.Path, said: list[str]) -> Callable[[], Any]:
    entry = _pretraining_entry(said)
    config, workdir = _pretrain_config(base, said), base / "pretrain"
    return lambda: entry(config, str(workdir))


def finetune(base: pathlib.Path, said: list[str]) -> Callable[[], Any]:
    workdir = base / "pretrain"
    if not list((workdir / "checkpoints").glob("*")):  # the pretrain scenario did not run
        said.append("  finetune starts from a pretraining run made here untraced")
        _pretraining_entry([])(_pretrain_config(base, said), str(workdir))
    entry = find("finetune", [("bert_jax.runs.finetune", "finetune"),
                              ("bert_jax.tasks.finetune", "finetune"),
                              ("bert_jax.finetune", "finetune")], said)  # fmt: skip
    glue = find("glue config", [("bert_jax.configs.glue", "get_config")], said)
    import bert_jax

    data = pathlib.Path(bert_jax.__file__).parent.parent / "tests/fixtures/tasks/glue/mrpc"
    c = glue("mrpc")
    values = dict(
        init_checkpoint=str(workdir), data_dir=str(data), do_lower_case=True, max_seq_length=64,
        train_batch_size=2, eval_batch_size=4, num_train_epochs=1.0, log_every_steps=1,
        num_devices=1,
    )  # fmt: skip
    c.update({k: v for k, v in values.items() if k in c})
    out = base / "finetune"
    return lambda: entry(c, str(out))


def ablate(base: pathlib.Path, said: list[str], table: str) -> Callable[[], Any]:
    entry = find("ablate", [("bert_jax.ablations.run", "ablate"),
                            ("bert_jax.ablations", "ablate")], said)  # fmt: skip
    scale_for = find("scale_for", [("bert_jax.ablations.run", "scale_for"),
                                   ("bert_jax.ablations.scales", "scale_for")], said)  # fmt: skip
    scale = scale_for("cpu", quick=True)
    said.append(f"  ablate: table {table}, scale {scale.name}, model {scale.model}, "
                f"{scale.steps} steps per arm")  # fmt: skip
    messages: list[str] = []
    try:  # its shards ahead, untraced (no ConfigDict is met there); not needed, only faster
        from bert_jax.ablations import tables
        from bert_jax.ablations.harness import Harness

        harness = Harness(str(base / "ablate"), scale, "", {}, messages.append)
        for arm in tables.get(table).arms(scale):
            if not getattr(arm.pretrain, "checkpoint", ""):
                harness.shards(arm.pretrain.objective)
    except Exception as e:  # an internal API that moved: ablate builds them itself
        said.append(f"  ablate's shards not built ahead ({type(e).__name__}: {e})")
    return lambda: entry(table, scale, str(base / "ablate"), progress=messages.append)


def _where(root: pathlib.Path) -> str:
    try:
        head = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%h %s"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return f"bert_jax traced: {root} (not in a git checkout)"
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "."],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    head = head.strip()[:72]
    return f"bert_jax traced: {root} at {head}" + (" (+ uncommitted changes)" if dirty else "")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--list", action="store_true", help="list functions and edges")
    parser.add_argument("--workdir", default="", help="keep setup and runs here (default: temp)")
    parser.add_argument("--ablate_table", default="nsp_sop", help="the ablate scenario's table")
    parser.add_argument("--settings_regex", default=SETTINGS_REGEX,
                        help="settings classes tracked beside ConfigDicts ('' = none)")  # fmt: skip
    args = parser.parse_args(argv)

    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.WARNING)
    import bert_jax

    root = pathlib.Path(bert_jax.__file__).parent.resolve()
    print(_where(root), flush=True)
    base = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="walks-"))
    base.mkdir(parents=True, exist_ok=True)
    chosen = SCENARIOS if args.scenario == "all" else (args.scenario,)
    makers: dict[str, Callable[[pathlib.Path, list[str]], Callable[[], Any]]] = {
        "pretrain": pretrain,
        "finetune": finetune,
        "ablate": lambda b, s: ablate(b, s, args.ablate_table),
    }
    lines = []
    try:
        for name in chosen:
            said: list[str] = []
            call = makers[name](base, said)
            tracer = Tracer(root, args.settings_regex)
            start = time.time()
            tracer.run(call)
            print(f"[{name}] traced in {time.time() - start:.0f}s", file=sys.stderr, flush=True)
            print("\n".join(said))
            lines.append(tracer.walk.line(name))
            print(lines[-1], flush=True)
            print("  ConfigDicts alone: " + tracer.configs.line(name).split(": ", 1)[1])
            if args.list:
                print(tracer.walk.listing(tracer.configs), flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(base, ignore_errors=True)
    if len(lines) > 1:
        print("\n".join(["summary:", *lines]))


if __name__ == "__main__":
    main()
