"""`bert-jax pretrain --config pretrain.py:<preset> --workdir DIR
[--config.key=value ...]`: sharded BERT pretraining from TFRecord shards (T5 with
`--config t5.py:<preset>`: encoder-decoder span corruption / prefix LM, bert_jax/configs/t5.py).

Rerunning the same command resumes from DIR/checkpoints exactly; SIGTERM saves and stops, exiting
2 with a one-line error (the run is unfinished).
"""

from __future__ import annotations

from absl import flags, logging
from ml_collections import config_flags

from bert_jax.errors import BertJaxError

_CONFIG = config_flags.DEFINE_config_file(
    "config",
    None,
    "a config by name or path: "
    "pretrain.py:<preset> (tiny..large, L4-H256), pretrain_cpu.py, pretrain_phase2.py, "
    "t5.py:<tiny|small|base> (T5 span corruption)",
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (local or gs://).")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise BertJaxError(f"unexpected arguments: {' '.join(argv[1:])}")
    if _CONFIG.value is None:
        raise BertJaxError("--config is required, e.g. pretrain.py:base")
    if not _WORKDIR.value:
        raise BertJaxError("--workdir is required")
    from bert_jax.atomic_write import check_writable_dir
    from bert_jax.runs.pretrain import run_pretraining

    check_writable_dir(_WORKDIR.value, "--workdir")
    if _CONFIG.value.get("export_hf_dir"):  # written after training: checked before it
        check_writable_dir(
            _CONFIG.value.export_hf_dir, "--config.export_hf_dir", leave_no_trace=True
        )
    logging.set_verbosity(logging.WARNING)  # Orbax logs every save step at INFO

    result = run_pretraining(_CONFIG.value, _WORKDIR.value)
    # Non-zero after a SIGTERM: `set -e` launch scripts (the ablation plans: phase 2 reads
    # phase 1, fine-tuning reads phase 2) and tpu_setup must not go on from an unfinished run.
    result.require_finished(_WORKDIR.value, _CONFIG.value.train_steps)
