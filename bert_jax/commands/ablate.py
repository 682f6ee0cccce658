"""`bert-jax ablate`: reproduce one of the BERT paper's ablations, every arm end to end.

  bert-jax ablate --table 5 --scale cpu --workdir /tmp/ablate --seeds 3
  bert-jax ablate --table 5 --scale cpu --workdir /tmp/q --quick        # minutes, every arm
  bert-jax ablate --table 5 --scale host --corpus 'wiki/*.txt' --workdir /data/abl  # one GPU
  bert-jax ablate --table 5 --scale host --corpus tfds:wikipedia/20230601.en --vocab_file \
      bert-base-uncased/vocab.txt --workdir /data/abl
  bert-jax ablate --table 5 --scale host --corpus ... --workdir gs://B/abl --topology v4-8
  bert-jax ablate --table 5 --scale tpu --workdir gs://B/ablate --tpu_name my-v4 --topology v4-32

Tables: the values of --table below (bert_jax/ablations/tables/, one module each).
Each arm is pretrained on --corpus (default: the embedded corpus; streamed, its held-out
documents a sample by hash: bert_jax/ablations/corpus_split.py) in --vocab_file's vocab (default:
one trained on the corpus, or on a 100 MB sample of it) and fine-tuned on the built-in
offline suite (sst2, mrpc, conll, squad; bert_jax/ablations/suite.py) over --seeds seeds, or on
your data with --task KIND:DIR (kinds sst2, mrpc, mnli, conll, squad; the layouts `bert-jax
finetune` reads), each arm pretrained --pretrain_seeds times. Writes WORKDIR/<table>.json,
<table>.md (median ± std, the paper's number, the best constant answer of each dev split) and
plots; every claim is judged by a calibrated 95% interval of its difference (Welch's t over the
arms' pretraining runs, the dev examples' sampling added; bert_jax/ablations/interval.py): holds,
reversed, or unresolved at this scale. Rerun the same command after
a kill: finished runs are kept, the rest continue.
Two sweeps may share a workdir at once: a run the other is training is put off and retried.
--rerender DOC.json recomputes a written table's intervals and verdicts from the per-example
rows saved beside it (DOC.rows.npz), without its workdir.
--only_tasks runs some of a table's columns (e.g. all but the costly conll); the full table,
run later on the same workdir, reuses their runs.
Units (bert_jax/ablations/units.py): with --units_dir D every finished pretraining run and the
runs made on its checkpoint are kept in D as small files (scores, per-example rows, run times,
a manifest naming commit, device and digests of the settings, text and suite), and D's units are
brought in before anything runs, so a table assembles from units made on several machines:
  bert-jax ablate --table 5 --workdir W --units_dir D --plan       # what is left, how long
  bert-jax ablate --table 5 --workdir W --units_dir D --units 'No NSP:1,LTR & No NSP:1'
  bert-jax ablate --table 5 --workdir W2 --units_dir D           # the table, from D's units
  bert-jax ablate --table 5 --only_tasks conll --workdir W3 --units_dir D --assemble
--assemble trains nothing: each arm over every finished unit of it in D, as many pretraining
runs as it has there; arms with none are left out with their claims (the md names them).
A unit longer than one machine's time is carried: a --units run stopped by SIGTERM (or any
error) before its unit is finished copies its pretraining run's latest checkpoint into
D/SCALE/KEY/carry/STEP (--carry does it for a run killed outright, from its last periodic
checkpoint), and the same --units command on another machine with D continues from there:
  kill -TERM PID; git add D && git commit ...          # at the first machine's end
  bert-jax ablate --table 5 --workdir W4 --units_dir D --units 'No NSP:3'   # elsewhere
"""

from __future__ import annotations

from absl import flags

from bert_jax.ablations import tables
from bert_jax.errors import BertJaxError

_TABLE = flags.DEFINE_enum(
    "table", None, tables.names(),
    "Which ablation: " + "; ".join(f"{n} = {tables.get(n).summary}" for n in tables.names()) + ".",
)  # fmt: skip
_SCALE = flags.DEFINE_enum(
    "scale", "cpu", ["cpu", "host", "tpu"],
    "cpu: tiny models here; host: BERT-small arms on one GPU (or, with --topology, one TPU VM); "
    "tpu: the paper's recipe on a slice.",
)  # fmt: skip
_WORKDIR = flags.DEFINE_string("workdir", None, "Where runs, tables and plots go.")
_CORPUS = flags.DEFINE_string(
    "corpus", "", "Pretraining text: files, globs, gs://, tfds:NAME[:SPLIT][#FEATURE] or "
    "embedded[:N], comma-separated, as create-pretraining-data's --input_file (default: the "
    "embedded corpus). Streamed: the held-out documents are a sample by hash, sized to the suite."
)  # fmt: skip
_VOCAB_FILE = flags.DEFINE_string(
    "vocab_file", "", "A WordPiece vocab.txt (e.g. bert-base-uncased's) or a sentencepiece "
    "*.model to use instead of training a vocab on the corpus."
)  # fmt: skip
_TASK = flags.DEFINE_multi_string("task", [], "KIND:DIR, replaces a built-in task (repeatable).")
_ONLY_TASKS = flags.DEFINE_list(
    "only_tasks", [], "Run and report only these of the table's tasks, e.g. sst2,squad "
    "(default: all); the table's md names the ones left out."
)  # fmt: skip
_STEPS = flags.DEFINE_integer("steps", 0, "Pretraining steps per arm (0 = the scale's).")
_MODEL = flags.DEFINE_string("model", "", "Model preset of the arms (Table 6 keeps its grid).")
_SIZES = flags.DEFINE_string(
    "sizes", "", "Table 6's grid, e.g. L1-H128-A2,L4-H192-A3 (default: the scale's)."
)
_SEEDS = flags.DEFINE_integer("seeds", 0, "Fine-tuning seeds per task (0 = the scale's, 5).")
_PRETRAIN_SEEDS = flags.DEFINE_integer(
    "pretrain_seeds", 0, "Pretraining runs per arm (0 = the scale's: 2 at cpu, 1 at tpu)."
)
# The pretraining recipe; --scale host before 2026-11-29 was --steps 100000 --batch 256
# --learning_rate 5e-4 --warmup 2000 --pretrain_dropout 0.1 (bert_jax/ablations/scales.py).
_BATCH = flags.DEFINE_integer(
    "batch", 0, "Pretraining batch in sequences (0 = the scale's; host: 1024). The host recipe "
    "before 2026-11-29: --steps 100000 --batch 256 --learning_rate 5e-4 --warmup 2000 "
    "--pretrain_dropout 0.1."
)  # fmt: skip
_LR = flags.DEFINE_float(
    "learning_rate", 0, "Peak pretraining learning rate (0 = the scale's; host: 1e-3)."
)
_WARMUP = flags.DEFINE_integer(
    "warmup", None, "Pretraining warmup steps (unset = the scale's; host: 1500; 0 = none)."
)
_PRETRAIN_DROPOUT = flags.DEFINE_float(
    "pretrain_dropout", None, "Pretraining dropout of hidden states and attention probabilities "
    "(unset = the scale's: 0 at host and cpu, 0.1 at tpu; 0 = none); fine-tuning's is unchanged."
)  # fmt: skip
_FT_EPOCHS = flags.DEFINE_float("finetune_epochs", 0, "Fine-tuning epochs (0 = the scale's).")
_FT_LR = flags.DEFINE_float("finetune_lr", 0, "Fine-tuning learning rate (0 = the scale's).")
_QUICK = flags.DEFINE_bool("quick", False, "Minutes-long run of every arm (what tests use).")
_RERENDER = flags.DEFINE_string(
    "rerender", "", "A table's json written before (its .rows.npz beside it): compute its "
    "intervals and verdicts again from those rows and rewrite it and its md; nothing runs."
)  # fmt: skip
_UNITS_DIR = flags.DEFINE_string(
    "units_dir", "", "Keep every finished unit (a pretraining run with its fine-tuning and "
    "evaluation runs: scores, per-example rows, run times, manifest) here, and bring in the "
    "finished units already here first: tables assemble from the units of any number of "
    "machines (e.g. experiments/ablations/results/units)."
)  # fmt: skip
_UNITS = flags.DEFINE_string(
    "units", "", "Run only these units of the table, ARM:SEED,... (an arm and its pretraining "
    "seed, e.g. 'No NSP:2,LTR & No NSP:2'), keep them in --units_dir and write no table."
)  # fmt: skip
_PLAN = flags.DEFINE_bool(
    "plan", False, "Print which units the table still needs (after bringing in --units_dir) "
    "and about how long each takes by the finished runs of its kind; nothing runs."
)  # fmt: skip
_ASSEMBLE = flags.DEFINE_bool(
    "assemble", False, "Train nothing: the table from every finished unit in --units_dir, "
    "each arm over as many pretraining runs as it has there; arms with none are left out."
)  # fmt: skip
_CARRY = flags.DEFINE_bool(
    "carry", False, "Train nothing: keep the finished runs of the --units in --units_dir (a "
    "killed job's finished rate-choice runs too) and copy their unfinished latest pretraining "
    "checkpoints (weights and optimizer state) there, where a run of the same units on another "
    "machine continues them (a --units run stopped by SIGTERM does this itself)."
)  # fmt: skip
_TPU_NAME = flags.DEFINE_string("tpu_name", "", "--scale tpu: the TPU VM to launch on.")
_TOPOLOGY = flags.DEFINE_string(
    "topology", "v4-32",
    "--scale tpu: the slice to fit-check; --scale host with --topology (e.g. v4-8): plan for that "
    "TPU VM instead of running here.",
)  # fmt: skip

KINDS = ("sst2", "mrpc", "mnli", "conll", "squad")


def _tasks(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        kind, sep, directory = value.partition(":")
        if not sep or kind not in KINDS or not directory:
            raise BertJaxError(f"--task={value}: expected KIND:DIR with KIND in {', '.join(KINDS)}")
        out[kind] = directory
    return out


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise BertJaxError(f"unexpected arguments: {' '.join(argv[1:])}")
    if _RERENDER.value:
        from bert_jax.ablations import report

        doc = report.rerender(_RERENDER.value)
        verdicts = report.tally(doc["claims"]) or "no claims"
        print(f"rewrote {_RERENDER.value} and its md: {verdicts}")
        return
    if not _TABLE.value or not _WORKDIR.value:
        raise BertJaxError("--table and --workdir are required")
    from bert_jax.ablations.run import ablate, scale_for
    from bert_jax.atomic_write import check_writable_dir

    check_writable_dir(_WORKDIR.value, "--workdir")

    scale = scale_for(_SCALE.value, _STEPS.value, _MODEL.value, _SEEDS.value, _QUICK.value,
                      _FT_EPOCHS.value, _FT_LR.value, _SIZES.value,
                      pretrain_seeds=_PRETRAIN_SEEDS.value, batch=_BATCH.value,
                      learning_rate=_LR.value, warmup=_WARMUP.value,
                      dropout=_PRETRAIN_DROPOUT.value)  # fmt: skip
    tasks = _tasks(_TASK.value)
    if _SCALE.value == "tpu" or (_SCALE.value == "host" and _TOPOLOGY.present):
        from bert_jax.ablations.tpu import plan

        plan(_TABLE.value, scale, _WORKDIR.value, _TOPOLOGY.value, _TPU_NAME.value, tasks,
             tuple(_ONLY_TASKS.value))  # fmt: skip
        return
    only = tuple(_ONLY_TASKS.value)
    if _PLAN.value:
        from bert_jax.ablations.unit_jobs import plan

        plan(_TABLE.value, scale, _WORKDIR.value, _CORPUS.value, tasks, only_tasks=only,
             units_dir=_UNITS_DIR.value, vocab=_VOCAB_FILE.value)  # fmt: skip
        return
    from bert_jax.ablations.unit_jobs import parse_units

    ablate(_TABLE.value, scale, _WORKDIR.value, _CORPUS.value, tasks, only_tasks=only,
           units_dir=_UNITS_DIR.value, units=parse_units(_UNITS.value),
           vocab=_VOCAB_FILE.value, assemble=_ASSEMBLE.value, carry=_CARRY.value)  # fmt: skip
