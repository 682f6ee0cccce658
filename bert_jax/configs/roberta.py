"""RoBERTa pretraining (Liu et al. 2019): the BERT encoder with positions offset past the padding
id and one token type, masked LM only (no NSP) on FULL-SENTENCES (or DOC-SENTENCES:
`--config.objective=doc_sentences`), dynamic masking, large batches, Adam beta2 0.98.

  bert-jax build-vocab --kind=byte_bpe --input_file=embedded: --vocab_size=50265 \
      --output_dir=/tmp/roberta-vocab
  bert-jax create-pretraining-data --objective=full_sentences --dynamic_masking \
      --input_file=embedded:2000 --output_dir=/tmp/roberta-data --vocab_file=VOCAB \
      --max_seq_length=512
  bert-jax pretrain --config roberta.py:base --workdir /tmp/roberta \
      --config.train_files='/tmp/roberta-data/shard-*.tfrecord' --config.vocab_file=VOCAB

Presets: `base` and `large` (L12 H768 / L24 H1024) with the paper's Table 9 recipe: batch 8k
sequences of 512 tokens, 500k steps, peak lr 6e-4 / 4e-4 after 24k / 30k warmup steps, linear
decay, Adam beta2 0.98, eps 1e-6, weight decay 0.01, no gradient clipping, dropout 0.1; the
fairseq example config (variants.md section 4) is the base size at batch 2048, lr 5e-4, 10k
warmup, 125k steps. A batch that does not fit the slice is split with
`--config.grad_accum_steps`: `bert-jax compile --config roberta.py:base --topology v4-32
--config.grad_accum_steps=8 --config.remat_policy=full --config.scan_layers=True
--config.dynamic_masking=False` (masking runs on the host; compile has no vocab) fits in 4.48
of 32 GiB per chip; `large` on v4-64 with grad_accum_steps=16 and remat_policy=full in 2.18 GiB
(experiments/tpu_family_table.md).
`cpu`: L2 H128, the shards' seq and predictions (stats.json), batch 32, lr 2e-3, 3000 steps.
Expected: the paper's RoBERTa-base dev results (Table 8, 160 GB of text) MNLI 87.6, SST-2 94.8,
QNLI 92.8; at base size with Books+Wiki, 1M steps of batch 256, FULL-SENTENCES reached SQuAD
1.1/2.0 F1 90.4/79.1, MNLI-m 84.7 and DOC-SENTENCES 90.6/79.7, 84.7 (Table 2). `cpu`, measured
by `python experiments/family_learning.py --families roberta` (3 MB of the embedded corpus, a
4000-token byte-level BPE, 3000 steps, about 15 minutes with other jobs on the 2-core machine):
held-out masked-LM accuracy 0.207 against 0.041 for always predicting the most frequent target
on the same dynamic masks (tests/test_family_learning.py runs 200 steps). Fine-tuning reads the
byte-level BPE (vocab.json + merges.txt or tokenizer.json) from the checkpoint and frames pairs
as `<s> A </s></s> B </s>`.
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import pretrain_config

_PRESETS = {
    # model preset, seq, batch, lr, warmup, steps
    "base": ("base", 512, 8192, 6e-4, 24_000, 500_000),
    "large": ("large", 512, 8192, 4e-4, 30_000, 500_000),
    "cpu": ("tiny", 64, 32, 2e-3, 100, 3000),  # seq: the shards' (below)
}


def get_config(preset: str = "base") -> ml_collections.ConfigDict:
    if preset not in _PRESETS:
        raise ValueError(f"roberta preset {preset!r}: use one of {', '.join(_PRESETS)}")
    model, seq, batch, lr, warmup, steps = _PRESETS[preset]
    c = pretrain_config(model)
    c.family = "roberta"
    c.objective = "full_sentences"
    c.vocab_size = 50265  # GPT-2's byte-level BPE; replaced by the vocab file's size
    c.dynamic_masking = True  # a new mask every time a sequence is seen
    c.max_seq_length = seq
    # fairseq masks 15% of every sequence without a cap: room for all of them.
    c.max_predictions_per_seq = -(-seq * 15 // 100)
    c.global_batch_size = batch
    c.learning_rate, c.warmup_steps, c.train_steps = lr, warmup, steps
    c.schedule = "linear"
    c.adam_b1, c.adam_b2, c.adam_eps = 0.9, 0.98, 1e-6
    c.weight_decay = 0.01
    c.max_grad_norm = 0.0  # Table 9: gradient clipping 0.0
    if preset == "cpu":
        c.dtype = "float32"
        c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.0
        # None: the shards' (stats.json, else their first record), as pretrain_cpu.py; a value
        # given on the command line is checked against them (bert_jax/input/geometry.py)
        unset = ml_collections.FieldReference
        c.max_seq_length = unset(None, field_type=int)
        c.max_predictions_per_seq = unset(None, field_type=int)
        c.log_every_steps, c.eval_every_steps, c.checkpoint_every_steps = 50, 500, 500
        c.max_eval_steps = 20
        c.mesh.data, c.mesh.fsdp = 1, 1
    return c
