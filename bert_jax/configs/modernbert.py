"""ModernBERT pretraining (Warner et al. 2024): the pre-norm, bias-free encoder with GeGLU, rotary
positions and a global layer every third (the others see +-64 tokens), masked LM at 30% on
packed full sentences, no NSP, masks drawn at training time.

  bert-jax create-pretraining-data --objective=modernbert --input_file=embedded:2000 \\
      --output_dir=/tmp/mb-data --vocab_file=VOCAB --max_seq_length=128 \\
      --max_predictions_per_seq=40 --dynamic_masking
  bert-jax pretrain --config modernbert.py:cpu --workdir /tmp/mb \\
      --config.train_files='/tmp/mb-data/train/shard-*.tfrecord' --config.vocab_file=VOCAB \\
      --config.export_hf_dir=/tmp/mb/hf

Presets: `base` (22 x 768, 12 heads, GeGLU 1152) and `large` (28 x 1024, 16 heads, GeGLU 2624),
the released shapes, at sequence 1024 with lr 8e-4 / 5e-4 and weight decay 1e-5 (the batch,
4608 sequences at the end of its warmup, and these rates are as we recall the paper: not checked
here); `cpu` (2 x 128, GeGLU 192) at sequence 64. The trained model exports (`export_hf_dir`) as
transformers' ModernBertForMaskedLM with its tokenizer, which `bert-jax finetune` loads.
The paper's optimizer (StableAdamW), its trapezoidal schedule with 1-sqrt decay and batch-size
warmup are not in the shared trainer yet: these presets use AdamW with linear decay.
Expected, `cpu`: see tests/test_modernbert_family.py (held-out masked-LM accuracy against the
unigram rate) and the family notes in the README.
"""

from __future__ import annotations

import ml_collections

from bert_jax.objectives.modernbert import MASKED_LM_PROB
from bert_jax.train.config import pretrain_config

_PRESETS = {
    # BERT size preset, GeGLU width, seq, predictions, batch, lr, warmup, steps
    "base": ("L22-H768-A12", 1152, 1024, 320, 4608, 8e-4, 3_000, 400_000),
    "large": ("L28-H1024-A16", 2624, 1024, 320, 4608, 5e-4, 3_000, 400_000),
    "cpu": ("L2-H128-A2", 192, 64, 20, 32, 2e-3, 100, 3000),
}


def get_config(preset: str = "cpu") -> ml_collections.ConfigDict:
    if preset not in _PRESETS:
        raise ValueError(f"modernbert preset {preset!r}: use one of {', '.join(_PRESETS)}")
    model, inner, seq, predictions, batch, lr, warmup, steps = _PRESETS[preset]
    c = pretrain_config(model)
    c.objective = "modernbert"
    c.intermediate_size = inner
    c.max_seq_length = seq
    c.max_predictions_per_seq = predictions
    c.dynamic_masking = True
    c.masked_lm_prob = MASKED_LM_PROB
    c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.0
    c.global_batch_size = batch
    c.learning_rate = lr
    c.warmup_steps = warmup
    c.train_steps = steps
    c.weight_decay = 1e-5
    c.schedule = "linear"
    if preset == "cpu":
        c.dtype = "float32"
        c.log_every_steps = 50
        c.eval_every_steps = c.checkpoint_every_steps = 500
        c.max_eval_steps = 20
        c.mesh.data, c.mesh.fsdp = 1, 1
    return c
