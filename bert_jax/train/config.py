"""The one config schema of every training run: pretraining and fine-tuning are training with
another task, so they share the keys of `training_config()` and add their own.

    training_config()           every key the trainer and the loop read (bert_jax.train.trainer,
                                bert_jax.train.loop), with neutral defaults
    pretrain_config(preset)     + the pretraining keys, the paper's phase-1 defaults
                                (bert_jax/configs/pretrain*.py start from it)
    finetune_config(task_family)  + the fine-tuning keys, run_classifier.py's defaults
                                (bert_jax/configs/{glue,squad,ner,swag}.py start from it)

A config file changes only what its recipe changes; the config handed to `bert_jax.train.train`
is this dict itself (fine-tuning fills in train_steps and warmup_steps per run).
"""

from __future__ import annotations

import ml_collections

from bert_jax.train.mesh import DEFAULT_RULES


def training_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    # Optimisation (bert_jax.train.optimizer).
    c.optimizer = "adamw"  # adamw | adam_reference (the TF code's) | lamb | stable_adamw
    c.schedule = "linear"  # reference | linear | constant | wsd (warmup, stable, decay)
    c.learning_rate = 1e-4  # peak learning rate (after warmup)
    c.train_steps = 0  # set by the recipe (pretraining) or from the epochs (fine-tuning)
    c.warmup_steps = 0  # steps of linear warmup from 0 to learning_rate
    c.decay_fraction = 0.1  # wsd: the last round(fraction x train_steps) steps decay to 0
    c.decay_shape = "1-sqrt"  # wsd's decay: 1-sqrt (lr x (1 - sqrt(p))) | linear (lr x (1 - p))
    c.weight_decay = 0.01  # decoupled weight decay (not on biases or norm scales)
    c.adam_b1 = 0.9  # Adam beta1: decay of the running mean of gradients
    c.adam_b2 = 0.999  # Adam beta2: decay of the running mean of squared gradients
    c.adam_eps = 1e-6  # Adam epsilon: floor of the update's denominator
    c.max_grad_norm = 1.0  # clip the global gradient norm to this (0 = no clipping)
    # < 1: layer i's rate x decay^(L - i), embeddings x decay^(L + 1) (ELECTRA fine-tuning: 0.8)
    c.layerwise_lr_decay = 1.0
    c.grad_accum_steps = 1  # microbatches per step (gradients accumulated over them)
    # Batch-size warmup (tasks with an example_mask): the full batch is read and computed, the
    # rows past the current size weigh 0 (bert_jax.train.schedules).
    c.batch_warmup_start = 0  # rows that count at step 0 (0 = no batch-size warmup)
    c.batch_warmup_steps = 0  # steps over which they grow linearly to the whole batch
    c.max_nonfinite_steps = 10  # consecutive skipped (non-finite) updates before stopping
    c.seed = 0  # initialisation, dropout, data order and masking
    # The generator of dropout masks: threefry (JAX's counter-based hash: the same masks on any
    # mesh) | rbg | unsafe_rbg (XLA's RngBitGenerator: the TPU's hardware generator, Philox
    # elsewhere; other masks, the same for a fixed mesh; each device draws its own rows' bits,
    # bert_jax/__init__.py) | auto (unsafe_rbg on TPU, where the hash took about a sixth of the
    # compiled step's estimated cycles, threefry elsewhere).
    c.dropout_prng = "auto"
    c.dtype = "float32"  # compute dtype; parameters and optimizer state stay float32

    # Model inputs: init_checkpoint is an HF dir, a Google TF checkpoint or a bert-jax workdir.
    c.init_checkpoint = ""
    c.vocab_file = ""  # vocab.txt; "" = the checkpoint's
    c.max_seq_length = 128  # tokens per sequence

    # Bookkeeping (bert_jax.train.loop).
    c.log_every_steps = 100  # steps between training-log lines and metrics.jsonl records
    c.eval_every_steps = 0  # steps between held-out evaluations (0 = none during training)
    c.checkpoint_every_steps = 1000  # steps between checkpoints (and one at the end)
    c.keep_checkpoints = 3  # newest checkpoints kept; older ones are deleted
    c.keep_checkpoint_every_steps = 0  # also keep every multiple of this step for good (0: none)
    c.async_checkpoints = True  # save checkpoints in the background while training goes on

    # Devices: data x fsdp x tensor = all devices (-1 = the rest).
    c.mesh = ml_collections.ConfigDict({"data": -1, "fsdp": 1, "tensor": 1})
    # logical_axis_rules: model axis name -> mesh axes (bert_jax.train.mesh.DEFAULT_RULES)
    c.logical_axis_rules = [[name, axes] for name, axes in DEFAULT_RULES]
    c.distributed = False  # True on multi-host TPU slices: jax.distributed.initialize()
    return c


def pretrain_config(preset: str = "base") -> ml_collections.ConfigDict:
    """Phase 1 of the paper's recipe (section A.2) for a model preset."""
    from bert_jax.config import preset as model_preset

    model_preset(preset)  # an unknown name is refused here, when the config file is read
    c = training_config()
    # Model: a preset plus the runtime choices of BertConfig.
    c.model = preset  # size: tiny..large, L{layers}-H{hidden}[-A{heads}]
    c.vocab_size = 30522  # replaced by the vocab file's size when vocab_file is given
    c.dtype = "bfloat16"
    c.scan_layers = False  # one compiled layer applied N times (faster compiles)
    c.remat_policy = "none"  # none | full | dots | dots_no_batch
    # xla (every backend) | cudnn (NVIDIA GPU, bfloat16) | splash (TPU, length a multiple of 128)
    # | auto (the platform's kernel where it applies, else xla); the kernels run only where
    # attention probabilities are not needed (attention dropout 0, evaluation).
    c.attention_implementation = "xla"
    c.hidden_dropout_prob = 0.1  # dropout after embeddings, attention output and FFN
    c.attention_probs_dropout_prob = 0.1  # dropout on attention probabilities
    c.objective = "mlm_nsp"  # a bert_jax.objectives name: mlm_nsp | mlm | mlm_sop | full_sentences
    # The model family (bert_jax.arch.bert.variants): its switches on top of the `model` size, e.g.
    # albert (E=128, shared layers), roberta (position offset), electra (no pooler).
    c.family = "bert"
    c.embedding_size = ml_collections.FieldReference(None, field_type=int)  # None: the family's
    # GELU: None = the family's (BERT: exact erf), or gelu_new, the tanh form (fewer TPU cycles)
    # ("gelu_new" is google-research/bert's modeling.py GELU and ALBERT's; on a v4-8 the TPU
    # compiler estimates BERT-base's step at 6% fewer cycles with it: README, Benchmarks)
    c.hidden_act = ml_collections.FieldReference(None, field_type=str)
    c.generator_size = 0.25  # ELECTRA: the generator's width as a fraction of the discriminator's
    # Distillation (bert_jax.pretraining.distillation): a teacher path (HF dir, TF checkpoint,
    # workdir) replaces `model`/`family` by the teacher's with student_layers (0 = half) of its
    # layers.
    c.teacher = ""  # distil from this teacher (HF dir, TF checkpoint, workdir); "" = no teacher
    c.student_layers = 0  # the student's layers, taken from the teacher's (0 = half of them)

    # Data (TFRecord shards in the reference schema; comma-separated globs, local or gs://).
    c.train_files = ""  # training shards
    c.eval_files = ""  # held-out shards for evaluation; "" = none
    c.dynamic_masking = False  # RoBERTa-style masking at input time (needs vocab_file)
    c.masked_lm_prob = 0.15  # fraction of tokens selected for prediction (dynamic masking)
    # The split of the selected tokens under dynamic masking; None = the objective's (80/10/10).
    c.mask_prob = ml_collections.FieldReference(None, field_type=float)  # share -> [MASK]
    c.random_prob = ml_collections.FieldReference(None, field_type=float)  # share -> random id
    c.max_predictions_per_seq = 20  # masked positions per sequence (as in the shards)
    # Instances per row (create-pretraining-data --pack_sequences): None = the shards' (their
    # stats.json or first record); > 1 reads packed rows (pack_ids, one label per slot).
    c.pack_sequences = ml_collections.FieldReference(None, field_type=int)
    c.global_batch_size = 256  # sequences per step over all devices
    c.eval_batch_size = 0  # 0 = global_batch_size
    c.max_eval_steps = 100  # batches per evaluation

    # Optimisation: Adam lr 1e-4, 10k warmup steps, then the reference's linear decay.
    c.train_steps = 900_000
    c.warmup_steps = 10_000
    c.learning_rate = 1e-4
    c.schedule = "reference"

    c.eval_every_steps = 10_000
    c.checkpoint_every_steps = 5_000
    c.export_hf_dir = ""  # write a Hugging Face directory at the end
    c.mesh = ml_collections.ConfigDict({"data": 1, "fsdp": -1, "tensor": 1})
    return c


def finetune_config(task_family: str) -> ml_collections.ConfigDict:
    """Fine-tuning defaults (run_classifier.py; AdamW + linear decay as in the paper's A.3;
    optimizer="adam_reference", schedule="reference" reproduce the TF code exactly)."""
    c = training_config()
    c.task_family = task_family  # glue | squad | ner | swag
    # Checkpoint and vocab: init_checkpoint is required; init_checkpoint_step picks a bert-jax
    # workdir's checkpoint (0 = the latest); vocab_file "" = the checkpoint's
    # vocab.txt; do_lower_case None = the checkpoint's setting, or True if it has none.
    c.do_lower_case = ml_collections.FieldReference(None, field_type=bool)
    c.init_checkpoint_step = 0
    c.data_dir = ""  # the task's data files (see the task family's config file)
    # One run: train_steps = int(train examples / train_batch_size * num_train_epochs) and
    # warmup_steps = train_steps * warmup_proportion are filled in by bert_jax.runs.finetune.
    c.train_batch_size = 32  # sequences per training step over all devices
    c.eval_batch_size = 64  # sequences per evaluation batch
    c.learning_rate = 5e-5
    c.num_train_epochs = 3.0  # passes over the training set (sets train_steps)
    c.warmup_proportion = 0.1  # share of train_steps spent warming up the learning rate
    c.log_every_steps = 50
    c.keep_checkpoints = 1
    c.num_devices = 0  # 0 = all devices; small CPU runs may be faster on 1
    c.attention_implementation = "xla"  # xla | cudnn | splash | auto, as in pretraining
    # The paper's sweep (A.3 / section 4.1) and seed restarts; best = best mean dev headline.
    c.sweep = False  # True: one run per (lr, epochs, batch) of the sweep_* grids
    c.sweep_learning_rates = (5e-5, 4e-5, 3e-5, 2e-5)  # the sweep's learning rates
    c.sweep_epochs = (2.0, 3.0, 4.0)  # the sweep's numbers of epochs
    c.sweep_batch_sizes = (16, 32)  # the sweep's train batch sizes
    c.num_seeds = 1  # runs per setting, seeds seed, seed+1, ...; reports mean/std/median
    c.bilstm_size = 0  # > 0: a BiLSTM between encoder and output layer (Table 5's "+ BiLSTM")
    # > 0: the learning rate of the layers the checkpoint lacks (the task head, the BiLSTM);
    # the encoder keeps learning_rate. 0 = learning_rate for all.
    c.head_learning_rate = 0.0
    # Encoder dropout (hidden and attention probabilities) while fine-tuning; None = the
    # checkpoint's config (the paper fine-tunes at 0.1; a run pretrained without has 0).
    c.dropout = ml_collections.FieldReference(None, field_type=float)
    c.random_init = False  # True: the checkpoint's architecture and tokenizer, BERT's random init
    c.init_num_layers = 0  # > 0: keep only the checkpoint's bottom N encoder layers (a student)
    # Task distillation (bert_jax.tasks.distill): learn a fine-tuned teacher's outputs.
    c.distill = ml_collections.ConfigDict()
    c.distill.data = ""  # a `bert-jax distill-data` output dir: train on the teacher's outputs
    c.distill.teacher = ""  # online: a fine-tuned teacher dir run forward in the student's step
    c.distill.input_file = ""  # online: unlabeled transfer text, as distill-data --input_file
    c.distill.pairing = "adjacent"  # online, pair tasks: adjacent | mixed (see distill-data)
    c.distill.max_transfer_examples = 0  # online: transfer examples kept (0 = all)
    c.distill.loss = "kl"  # kl: T^2 x KL at temperature T | mse: squared error of the logits
    c.distill.temperature = 1.0  # kl's temperature T
    c.distill.alpha = 0.0  # weight of the hard-label loss on the rows that have a label
    # An encoder-decoder init_checkpoint (T5) fine-tunes text-to-text (bert_jax.tasks.
    # text_to_text): targets and greedy decoding are cut at this many tokens.
    c.max_target_length = 16
    if task_family not in _FAMILY_KEYS:
        raise ValueError(
            f"fine-tuning task_family {task_family!r}: use one of {sorted(_FAMILY_KEYS)}"
        )
    c.update(_FAMILY_KEYS[task_family])
    return c


# The data and evaluation keys of each task family (bert_jax.tasks.jobs reads them).
_FAMILY_KEYS: dict[str, dict] = {
    # GLUE: the download layout in data_dir, or tfds glue/<task>.
    "glue": {
        "task": "mrpc",  # the GLUE task: cola sst2 mrpc stsb qqp mnli qnli rte wnli
        "use_tfds": False,  # read tfds glue/<task> instead of the TSV files in data_dir
        "tfds_dir": "",  # tfds data_dir of the prepared dataset ("" = tfds's default)
        "do_predict": False,  # also write the GLUE submission TSV of the test split
        # Several examples per row of max_seq_length (bert_jax.tasks.packed): same run, fewer
        # rows; train_batch_size still counts examples, eval_batch_size counts rows.
        "pack_examples": False,
    },
    # SQuAD: run_squad.py's geometry and decoding.
    "squad": {
        "version": "v1.1",  # v1.1 | v2.0 (v2.0 has unanswerable questions)
        "train_file": "train-v1.1.json",  # the training JSON in data_dir
        "predict_file": "dev-v1.1.json",  # the dev JSON in data_dir, scored with EM/F1
        "max_seq_length": 384,  # tokens per window (question + context piece)
        "doc_stride": 128,  # tokens between the starts of a long context's windows
        "max_query_length": 64,  # question tokens kept (longer questions are cut)
        "n_best_size": 20,  # start and end candidates per window in the answer search
        "max_answer_length": 30,  # longest answer considered, in tokens
        "null_score_diff_threshold": 0.0,  # v2.0: answer "" when null - best > this
        "strict": False,  # True: a training answer that cannot be placed is an error
        "skip_misaligned_answers": False,  # also skip answers not exactly at answer_start
        "eval_batch_size": 32,  # windows per evaluation batch
    },
    # CoNLL-2003: `word POS chunk NER` columns in data_dir, or tfds conll2003.
    "ner": {
        "train_file": "train.txt",  # the training file in data_dir
        "dev_file": "valid.txt",  # the dev file in data_dir, scored with entity F1
        "use_tfds": False,  # read tfds conll2003 instead of the files in data_dir
        "tfds_dir": "",  # tfds data_dir of the prepared dataset ("" = tfds's default)
        "strict": False,  # seqeval's IOB2 strict mode (default: conlleval-compatible)
        "feature_based": False,  # frozen last-4-layer features + a trained BiLSTM (Table 7)
        "lstm_size": 768,  # feature_based: units of the BiLSTM
        "pack_examples": False,  # several sentences per row, as GLUE's (bert_jax.tasks.packed)
    },
    # SWAG: the dataset's CSV files in data_dir.
    "swag": {
        "train_file": "train.csv",  # the training CSV in data_dir
        "dev_file": "val.csv",  # the dev CSV in data_dir, scored with accuracy
    },
}
