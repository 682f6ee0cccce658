"""Where an ablation's fine-tuning runs live under `<workdir>/finetune/`, one layout for the
harness (bert_jax.ablations.harness) and the TPU plan (bert_jax.ablations.tpu), so a plan's runs
land where a rerun of the table looks for them:

    finetune/KEY[@STEP]/TASK[+bilstm-hLR]/eEPOCHS-lrLR[-dDROPOUT]/seedS
"""

from __future__ import annotations

from bert_jax.ablations.scales import BILSTM_HEAD_LR, Scale
from bert_jax.ablations.tables import Arm


def arm_subdir(arm: Arm, task: str) -> str:
    """`KEY[@STEP]/TASK[+bilstm-hLR]`: where an arm's fine-tuning runs of a task live under
    `finetune/` (the harness's and the TPU plan's layout)."""
    at = "" if arm.step is None else f"@{arm.step}"
    return f"{arm.pretrain.key}{at}/{task}" + (f"+bilstm-h{BILSTM_HEAD_LR:g}" if arm.bilstm else "")


def budget_subdir(scale: Scale, learning_rate: float) -> str:
    """`eEPOCHS-lrLR[-dDROPOUT]`: a new budget reuses the pretraining runs; runs from before
    fine-tuning dropout was set had none."""
    budget = f"e{scale.finetune_epochs:g}-lr{learning_rate:g}"
    return budget + (f"-d{scale.finetune_dropout:g}" if scale.finetune_dropout else "")
