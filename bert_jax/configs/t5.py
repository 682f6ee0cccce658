"""T5 pretraining (Raffel et al. 2020): an encoder-decoder (bert_jax/arch/seq2seq/, the v1.1
layout: gated-GELU, untied output layer, no dropout in pretraining) trained on span corruption
(15% noise, mean span 3, sentinels) or prefix LM through the one loop (Seq2SeqTask).

  bert-jax build-vocab --input_file=embedded: --vocab_size=2000 --t5_spiece_size=2000 \\
      --output_dir=/tmp/t5-vocab
  bert-jax create-pretraining-data --objective=span_corruption --input_file=train.txt \\
      --spm_model=/tmp/t5-vocab/spiece.model --max_seq_length=64 --output_dir=/tmp/t5-data/train
  (the same for held-out text into /tmp/t5-data/eval)
  bert-jax pretrain --config t5.py:tiny --workdir /tmp/t5-tiny \\
      --config.spm_model=/tmp/t5-vocab/spiece.model \\
      --config.train_files='/tmp/t5-data/train/shard-*.tfrecord' \\
      --config.eval_files='/tmp/t5-data/eval/shard-*.tfrecord'
  bert-jax generate --init_checkpoint=/tmp/t5-tiny --input_file=in.txt --output_file=out.jsonl

config.max_seq_length is the inputs length (the shards' --max_seq_length); the targets length
follows from config.objective (span_corruption: T5's random_spans_helper, 512 -> 114 targets;
prefix_lm: as long as the inputs). The model's vocabulary is the sentencepiece model's pieces
plus T5's 100 sentinels. Rerunning the same command resumes; held-out evaluation every
eval_every_steps reports eval_target_accuracy (every target token), eval_content_accuracy (span
corruption: the dropped text tokens only, no sentinels or EOS) and eval_target_nll.

Presets:
  tiny   2+2 layers, d_model 128, inputs 64 (targets 14), batch 32, AdamW lr 3e-3, 2000 steps,
         float32, one CPU device (1.33M parameters with a 2000-piece vocabulary). Measured
         (experiments/t5.md, the embedded corpus, 10% of documents held out): 9 min on a shared
         2-core CPU; held-out target-token accuracy 0.325 vs 0.071 unigram, text-token accuracy
         0.068 vs 0.052, target NLL 3.99 vs 5.34 nats for the unigram model.
  small  T5 v1.1 small: 6+6 layers, d_model 512, d_ff 1024, 8 heads (70.6M parameters with a
         32,100-entry vocabulary, counted from the model's shapes)
  base   T5 v1.1 base: 12+12 layers, d_model 768, d_ff 2048, 12 heads (247.5M parameters)
  large  T5 v1.1 large: 24+24 layers, d_model 1024, d_ff 2816, 16 heads
small and base use T5's pretraining geometry (batch 128 x 512 inputs, 2^19 = 524,288 steps,
bfloat16, scanned layers, fsdp over all devices). T5 used Adafactor (lr 0.01, inverse square
root decay); this codebase has no Adafactor, so AdamW lr 1e-3 with 10k warmup steps and linear
decay stands in. No run of small or base has been recorded, so no result or time is claimed;
`bert-jax compile --config t5.py:base --topology v4-32` checks that the step fits a slice (seen:
7.52 GiB peak per device of 32 GiB, fsdp over 16 devices).
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.config import training_config


def get_config(preset: str = "small") -> ml_collections.ConfigDict:
    c = training_config()
    c.objective = "span_corruption"  # or prefix_lm (bert_jax.objectives.SEQ2SEQ)
    c.model = "t5-v1_1-small"  # a seq2seq preset (bert_jax.arch.seq2seq.seq2seq_preset)
    # Size overrides of the preset (None = the preset's); d_model: hidden width; d_kv: width of
    # each attention head; d_ff: feed-forward width; num_layers: encoder layers;
    # num_decoder_layers: decoder layers (None = num_layers); num_heads: attention heads.
    for key in ("d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads"):
        c[key] = ml_collections.FieldReference(None, field_type=int)
    c.dropout_rate = 0.0  # T5 v1.1 pretrains without dropout
    c.vocab_size = 32128  # T5's; replaced by the spm_model's pieces + 100 sentinels when given
    c.spm_model = ""  # the shards' T5 sentencepiece model (build-vocab --t5_spiece_size)
    c.train_files = ""  # create-pretraining-data --objective=span_corruption shards
    c.eval_files = ""  # held-out shards; "" = no evaluation
    c.max_seq_length = 512  # the inputs length
    c.global_batch_size = 128
    c.max_eval_steps = 20  # held-out batches per evaluation (0 = all)
    c.dtype = "bfloat16"
    c.scan_layers = True
    c.remat_policy = "none"
    c.learning_rate = 1e-3
    c.warmup_steps = 10_000
    c.train_steps = 2**19
    c.schedule = "linear"
    c.eval_every_steps = 10_000
    c.checkpoint_every_steps = 5_000
    c.mesh = ml_collections.ConfigDict({"data": 1, "fsdp": -1, "tensor": 1})
    if preset in ("small", "base", "large"):
        c.model = f"t5-v1_1-{preset}"
    elif preset == "tiny":
        c.d_model, c.d_kv, c.d_ff, c.num_layers, c.num_heads = 128, 32, 256, 2, 4
        c.max_seq_length = 64
        c.global_batch_size = 32
        c.dtype = "float32"
        c.scan_layers = False
        c.learning_rate = 3e-3
        c.weight_decay = 0.0
        c.warmup_steps = 100
        c.train_steps = 2000
        c.log_every_steps = 100
        c.eval_every_steps = 500
        c.checkpoint_every_steps = 500
        c.async_checkpoints = False
        c.mesh = ml_collections.ConfigDict({"data": 1, "fsdp": 1, "tensor": 1})
    else:
        raise ValueError(f"t5.py preset {preset!r}: use tiny, small, base or large")
    return c
