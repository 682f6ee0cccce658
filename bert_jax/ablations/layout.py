"""Where an ablation's fine-tuning runs live under `<workdir>/finetune/`, one layout for the
harness (bert_jax.ablations.harness) and the TPU plan (bert_jax.ablations.tpu), so a plan's runs
land where a rerun of the table looks for them:

    finetune/KEY[@STEP]/TASK[+bilstm-hLR]/eEPOCHS-lrLR[-dDROPOUT][-sSEQ]/seedS
"""

from __future__ import annotations

import re

from etils import epath

from bert_jax.ablations.scales import BILSTM_HEAD_LR, Scale
from bert_jax.ablations.tables import Arm
from bert_jax.errors import BertJaxError


def arm_subdir(arm: Arm, task: str) -> str:
    """`KEY[@STEP]/TASK[+bilstm-hLR]`: where an arm's fine-tuning runs of a task live under
    `finetune/` (the harness's and the TPU plan's layout)."""
    at = "" if arm.step is None else f"@{arm.step}"
    return f"{arm.pretrain.key}{at}/{task}" + (f"+bilstm-h{BILSTM_HEAD_LR:g}" if arm.bilstm else "")


def budget_subdir(scale: Scale, learning_rate: float, task: str, seq: int | None = None) -> str:
    """`eEPOCHS-lrLR[-dDROPOUT][-sSEQ]`: a new budget reuses the pretraining runs; runs from
    before fine-tuning dropout was set had none, and runs at the scale's sequence length name
    none (`seq` shorter: bert_jax.ablations.task_length)."""
    budget = f"e{scale.epochs_for(task):g}-lr{learning_rate:g}"
    budget += f"-d{scale.finetune_dropout:g}" if scale.finetune_dropout else ""
    return budget + length_suffix(scale, seq)


def length_suffix(scale: Scale, seq: int | None) -> str:
    """`-sSEQ` for fine-tuning runs shorter than the scale's length; runs at it name none."""
    return f"-s{seq}" if seq and seq != scale.seq else ""


def _model_of(key: str) -> str:
    """The model of a pretraining run key (tables.Pretrain.key): `released-MODEL`,
    `random-MODEL-OBJECTIVE[-pP]` or `OBJECTIVE-MODEL-MIX-sSTEPS[-pP]` (objectives have no
    hyphen, mixes are dotted)."""
    key = re.sub(r"-p\d+$", "", key.split("@")[0])
    if key.startswith("released-"):
        return key.removeprefix("released-")
    if key.startswith("random-"):
        return key.removeprefix("random-").rsplit("-", 1)[0]
    return re.sub(r"-\d+\.\d+\.\d+-s\d+$", "", key.split("-", 1)[1])


def run_kind(run: epath.Path) -> str:
    """What a fine-tuning or rate-choice run's cost depends on, from where it lives: the model,
    the task (with its BiLSTM) and the budget but its rate, `L2-H128-A2 conll e30-d0.1-s64` for
    `finetune/mlm-L2-H128-A2-80.10.10-s10000-p1/conll/e30-lr0.0003-d0.1-s64/seed0` and for
    `.../conll/choose-0.0003-0.0001-5e-05-e30-d0.1-s64/lr0.0001`."""
    key, task, budget = run.parts[-4:-1]
    if budget.startswith("choose-"):
        budget = re.search(r"e\d[\d.]*(-d[\d.]+)?(-s\d+)?$", budget).group(0)
    else:
        budget = re.sub(r"-lr[\d.e+-]+?(?=-d|-s|$)", "", budget)
    return f"{_model_of(key)} {task} {budget}"


def latest_step(directory: epath.Path) -> int:
    """The largest step named by a subdirectory of `directory` (0 without one): checkpoints are
    written under another name and renamed to their step's number when whole."""
    steps = [int(d.name) for d in directory.glob("*") if d.name.isdigit()]
    return max(steps, default=0)


def last_checkpoint(run: epath.Path) -> int:
    """The step of a pretraining run's latest finished checkpoint (0 without one)."""
    return latest_step(run / "checkpoints")


def require_checkpoint(run: epath.Path, what: str) -> None:
    """Refuses `what` (a new fine-tuning run, held-out rows not made yet) on a finished
    pretraining run without its checkpoint, as one brought in from a unit is
    (bert_jax.ablations.units), rather than make it on a retrained model."""
    if not last_checkpoint(run):
        raise BertJaxError(
            f"{run}: finished (done.json) but without its checkpoint, and {what} needs it; a "
            "unit brought in from another machine has none (nor rows it was made before "
            "keeping): its runs are finished where it was pretrained, so run this job there, "
            "or move the unit out of --units_dir and its directory out of the workdir to "
            "pretrain it again here"
        )
