"""Where an ablation's fine-tuning runs live under `<workdir>/finetune/`, one layout for the
harness (bert_jax.ablations.harness) and the TPU plan (bert_jax.ablations.tpu), so a plan's runs
land where a rerun of the table looks for them:

    finetune/KEY[@STEP]/TASK[+bilstm-hLR]/eEPOCHS-lrLR[-dDROPOUT][-sSEQ]/seedS
"""

from __future__ import annotations

from bert_jax.ablations.scales import BILSTM_HEAD_LR, Scale
from bert_jax.ablations.tables import Arm


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
