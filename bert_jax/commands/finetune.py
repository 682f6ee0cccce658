"""`bert-jax finetune`: fine-tune a checkpoint on GLUE, SQuAD, CoNLL-2003 NER or SWAG.

  bert-jax finetune --config glue.py:mrpc --workdir DIR \\
      --config.init_checkpoint=CKPT --config.data_dir=DATA [--config.key=value ...]

Writes DIR/eval_results.json (dev metrics), prediction files, metrics.jsonl and checkpoints/.
"""

from __future__ import annotations

import json

from absl import flags
from ml_collections import config_flags

from bert_jax.errors import BertJaxError

_CONFIG = config_flags.DEFINE_config_file(
    "config",
    None,
    "a config by name or path: glue.py:<task>, squad.py:<v1.1|v2.0>, ner.py, swag.py",
    lock_config=True,
)
_WORKDIR = flags.DEFINE_string("workdir", None, "output directory (local or gs://)")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise BertJaxError(f"unexpected arguments {argv[1:]}; use --flag=value")
    if _CONFIG.value is None:
        raise BertJaxError("--config is required, e.g. glue.py:mrpc")
    if not _WORKDIR.value:
        raise BertJaxError("--workdir is required")
    from bert_jax.atomic_write import check_writable_dir
    from bert_jax.runs.finetune import finetune

    check_writable_dir(_WORKDIR.value, "--workdir")

    results = finetune(_CONFIG.value, _WORKDIR.value)
    print(json.dumps(results, indent=2, sort_keys=True))
