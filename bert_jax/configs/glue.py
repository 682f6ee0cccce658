"""GLUE fine-tuning (BERT paper section 4.1): batch 32, 3 epochs, lr 5e-5 .. 2e-5, seq 128.

  bert-jax finetune --config glue.py:mrpc --workdir /tmp/mrpc \
      --config.init_checkpoint=/path/to/uncased_L-12_H-768_A-12 --config.data_dir=glue_data/MRPC

Tasks: cola sst2 mrpc stsb qqp mnli qnli rte wnli. data_dir holds the GLUE download layout
(train.tsv, dev.tsv, test.tsv; MNLI dev_matched/dev_mismatched); --config.use_tfds=True reads tfds
`glue/<task>` instead (prepared data). --config.do_predict=True also writes the GLUE submission
TSV (e.g. MRPC.tsv). --config.sweep=True runs lr {5e-5,4e-5,3e-5,2e-5} x epochs {2,3,4} x batch
{16,32}; --config.num_seeds=5 reports mean/std/median over seeds. --config.pack_examples=True
packs several examples per row (same steps and metrics; experiments/bench/bench_packing.py).
Any key of `bert_jax.train.config.finetune_config` can be overridden the same way
(--config.max_seq_length=256 --config.log_every_steps=10 --config.optimizer=adam_reference ...).

Expect (BERT-base uncased, dev): MRPC acc 84-88 (README: 84.55 at lr 2e-5), SST-2 ~92.7,
MNLI-m ~84.4, QNLI ~88.4 (paper Table 5). eval_results.json has the benchmark's metrics: MCC for
CoLA, F1 and accuracy for MRPC/QQP, Pearson/Spearman for STS-B, accuracy otherwise.
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import finetune_config


def get_config(task: str = "mrpc") -> ml_collections.ConfigDict:
    c = finetune_config("glue")
    c.task = task
    return c
