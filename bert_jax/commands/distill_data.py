"""`bert-jax distill-data`: a fine-tuned teacher labels the task's training inputs and any amount
of unlabeled transfer text; the rows and the teacher's outputs go to TFRecord shards + stats.json,
which a student learns from (`bert-jax finetune ... --config.distill.data=OUT`).

  bert-jax distill-data --teacher=TEACHER_WORKDIR --config=glue.py:sst2 \\
      --config.data_dir=glue_data/SST-2 --input_file='wiki/*.txt,embedded:' --output_dir=OUT
  bert-jax distill-data --teacher=HF_DIR --config=ner.py --config.data_dir=conll --output_dir=OUT
  bert-jax distill-data --teacher=DIR --config=squad.py:v1.1 --config.data_dir=squad \\
      --input_file='more_squad/*.json' --output_dir=OUT

The teacher is a fine-tuning workdir of ours (one run's directory) or a Hugging Face directory
whose model has a task head (*ForSequenceClassification, *ForTokenClassification,
*ForQuestionAnswering); its tokenizer makes the rows. --config is the task's fine-tuning config
(its data_dir, max_seq_length, eval_batch_size are read). --input_file: as create-pretraining-data
(one sentence per line, documents separated by blank lines; `embedded:`; `tfds:NAME`); squad takes
SQuAD-format JSON. Pairs made of transfer text: --pairing (bert_jax/tasks/distill/transfer.py).

Resumable (a rerun skips finished shards) and the same bytes for any --num_workers: run worker k
of n with --worker_index=k --num_workers=n (on a pod: one per host). Shard features: see
bert_jax/tasks/distill/cache.py.
"""

from __future__ import annotations

import json

from absl import flags
from ml_collections import config_flags

from bert_jax.errors import BertJaxError

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "the task's fine-tuning config: glue.py:<task>, ner.py, squad.py:<v1.1|v2.0>",
    lock_config=True,
)  # fmt: skip
_TEACHER = flags.DEFINE_string("teacher", None, "fine-tuned workdir or HF dir with a task head")
_TEACHER_STEP = flags.DEFINE_integer("teacher_step", None, "the workdir checkpoint (default: last)")
_INPUT = flags.DEFINE_string("input_file", "", "unlabeled transfer text (globs, embedded:, tfds:)")
_OUTPUT = flags.DEFINE_string("output_dir", None, "where the shards and stats.json go")
_PER_SHARD = flags.DEFINE_integer("examples_per_shard", 4096, "rows per TFRecord shard")
_PAIRING = flags.DEFINE_enum("pairing", "adjacent", ["adjacent", "mixed"],
                             "pair tasks: how transfer sentences are paired")  # fmt: skip
_MAX_TRANSFER = flags.DEFINE_integer("max_transfer_examples", 0, "transfer rows kept (0 = all)")
_SEED = flags.DEFINE_integer("seed", 0, "seed of the mixed pairing")
_WORKERS = flags.DEFINE_integer("num_workers", 1, "labelling workers sharing the shards")
_WORKER = flags.DEFINE_integer("worker_index", 0, "this worker's index in [0, num_workers)")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise BertJaxError(f"unexpected arguments {argv[1:]}; use --flag=value")
    if _CONFIG.value is None:
        raise BertJaxError("--config is required, e.g. glue.py:sst2")
    if not _TEACHER.value:
        raise BertJaxError("--teacher is required: a fine-tuned workdir or a HF dir")
    if not _OUTPUT.value:
        raise BertJaxError("--output_dir is required")
    from bert_jax.atomic_write import check_writable_dir
    from bert_jax.tasks.distill.labelling import label

    check_writable_dir(_OUTPUT.value, "--output_dir")
    stats = label(
        _CONFIG.value,
        _TEACHER.value,
        _OUTPUT.value,
        _INPUT.value,
        examples_per_shard=_PER_SHARD.value,
        num_workers=_WORKERS.value,
        worker_index=_WORKER.value,
        pairing=_PAIRING.value,
        max_transfer_examples=_MAX_TRANSFER.value,
        seed=_SEED.value,
        teacher_step=_TEACHER_STEP.value,
    )
    print(json.dumps(stats, indent=1, sort_keys=True))
