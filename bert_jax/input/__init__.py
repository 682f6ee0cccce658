"""Training-side input: TFRecord pretraining shards -> global `jax.Array` batches (Grain, no TF).

API (what the train loop codes against)::

    from bert_jax.input import PretrainInput, EvalInput, MaskingSpec

    batch_sharding = jax.NamedSharding(mesh, jax.P(("data", "fsdp")))   # only dim 0 is used
    train = PretrainInput(
        "gs://b/shards/train-*.tfrecord",      # glob, list of globs, or list of files
        global_batch_size=256, max_seq_length=128, max_predictions_per_seq=20,
        seed=0, shuffle=True, num_epochs=None,  # None = repeat forever (use it with >1 process:
                                                # hosts may hold different numbers of records)
        sharding=batch_sharding,                # None -> numpy arrays of this process's rows
        dynamic_masking=None,                   # or MaskingSpec.from_vocab_file(vocab, 0.15)
        # tuning (defaults): shuffle_window=1000 records, cycle_length=4 files read round-robin,
        # prefetch=4 batches in a background thread (0 = none), verify_crc=True (both CRCs of
        # every record: a corrupt shard raises BertJaxError naming the file and byte offset)
        vocab_size=None,    # or the model's: token ids outside [0, vocab_size) raise BertJaxError
                            # (record 0 of each file at start-up, then every batch; and a
                            # stats.json beside the shards recording another vocab size)
    )
    batch = next(train)      # dict[str, jax.Array], global shapes, sharded over the batch axis
    state = train.get_state()        # JSON-serialisable dict of this process; after any batch
    train2 = PretrainInput(...same args...); train2.set_state(state)  # exact continuation

    for batch in EvalInput("eval-*.tfrecord", 64, 128, 20, sharding=batch_sharding):
        ...                  # one pass, no shuffle; see `example_mask` below

Every batch (train and eval) has the keys
    input_ids, input_mask, segment_ids           int32   [B, max_seq_length]
    masked_lm_positions, masked_lm_ids           int32   [B, max_predictions_per_seq]
    masked_lm_weights                            float32 [B, max_predictions_per_seq]
    next_sentence_labels                         int32   [B]   (reference's [B, 1] squeezed)
    example_mask                                 float32 [B]   1 = real example, 0 = padding
Packed shards (`pack_sequences=S`, written by create-pretraining-data --pack_sequences=S) add
    pack_ids                                     int32   [B, max_seq_length] instance 1..S, 0 pad
and next_sentence_labels is [B, S] (0 in an empty slot; a slot is present iff its id occurs in
pack_ids). Masks, static or dynamic, are drawn per row at the same rate over its real tokens.
Training batches never contain padding (example_mask is all ones). Eval pads the last partial
batch with all-zero examples (example_mask 0, masked_lm_weights 0) instead of dropping them, and
every process yields the same number of eval batches, so multi-host eval never hangs; weight
NSP metrics by example_mask (MLM metrics are already weighted by masked_lm_weights).

Checkpointing (exact resume): `get_state()` is per process (each process reads its own files).
Save it per process, e.g. with Orbax + Grain's handler, which writes
`process_<i>-of-<n>.json` and calls our get_state/set_state:
    ocp.args.Composite(..., input=grain.checkpoint.CheckpointSave(train))
    ... restore with grain.checkpoint.CheckpointRestore(train)
or json.dumps(train.get_state()) into any per-process file. Restoring needs the same files,
batch size, seed, process count and masking settings; set_state checks and says what differs.

Speed (experiments/bench/bench_input.py, 128 tokens, 2-core machine shared with other jobs):
~85-100k sequences/s per CPU core static as numpy (~70k as jax.Array), ~60-67k with dynamic masking,
CRC checks included (they cost less than the run-to-run noise); records are parsed a batch at once
(bert_jax.shards.example.decode_batch).

Sharding of work: files (sorted after glob expansion) are split per JAX process
(`files[process_index::process_count]`; override with process_index=/process_count= to simulate
hosts); per-process batch = global_batch_size / process_count. Start-time checks raise
BertJaxError: no files match, fewer files than processes, a feature missing or of the wrong length
in the first record of a file, global batch not divisible by the process count or by the
data-parallel size (product of the mesh axes in the sharding's first spec entry).

Dynamic masking (RoBERTa): with `dynamic_masking=MaskingSpec(...)` the masked_lm_* features are
computed at input time (shards need only input_ids/input_mask/segment_ids/next_sentence_labels),
as the reference's create_masked_lm_predictions: num_to_predict = min(P, max(1, round(n * prob)))
with n the real tokens, never [CLS]/[SEP]/[PAD], 80% [MASK] / 10% original / 10% random id.
The draws are a counter-based hash of (seed, global example index), where the global example index
is step * global_batch_size + row; so the masks are fixed by (seed, step, example), independent of
prefetching and restarts.
"""

from bert_jax.input.eval_input import EvalInput
from bert_jax.input.pipeline import PretrainInput
from bert_jax.objectives.masking import MaskingSpec, mask_batch

__all__ = ["EvalInput", "MaskingSpec", "PretrainInput", "mask_batch"]
