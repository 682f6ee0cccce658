"""How big an ablation run is. `quick` is the minutes-long end-to-end run the tests use; `cpu`
the tables on a 2-core machine in hours (tiny models, the embedded corpus); `host` one
accelerator host (one GPU, or a single TPU VM such as v4-8): BERT-small arms on about 3e17
FLOPs each, between a fully trained BERT-Tiny (about 1e17) and Cramming's GPU-day (about 1e18),
on a `--corpus` large enough to repeat its text only a few times, at the short-budget recipe
(batch 1024 at 1e-3, 6% warmup, no pretraining dropout; see SCALES["host"]); `tpu` the paper's
recipe (BERT-base, batch 256, 1M steps at Adam 1e-4 with 10k warmup, 128 then 512 tokens).

`bert-jax ablate` overrides the pretraining recipe by flags (`run.scale_for`): the host recipe
before 2026-11-29 is `--scale host --steps 100000 --batch 256 --learning_rate 5e-4 --warmup 2000
--pretrain_dropout 0.1`, the same tokens per arm."""

from __future__ import annotations

import dataclasses

# BERT Table 6's grid of (layers, hidden, heads): the `tpu` scale's sizes.
PAPER_SIZES = ((3, 768, 12), (6, 768, 3), (6, 768, 12), (12, 768, 12), (12, 1024, 16),
               (24, 1024, 16))  # fmt: skip


# "+ BiLSTM"'s LSTMs and output layer train at the feature-based tagger's rate while the encoder
# keeps the arm's: at one rate for all (1e-3, 3e-4 or 1e-4) the new LSTM never left its all-"O"
# start on the token task (README, Measured).
BILSTM_HEAD_LR = 1e-3


@dataclasses.dataclass(frozen=True)
class Scale:
    name: str
    model: str  # pretraining model of every arm but Table 6's
    steps: int  # pretraining steps (phase 1 at `tpu` scale)
    seq: int
    predictions: int
    batch: int
    learning_rate: float
    warmup: int
    vocab_size: int
    corpus_bytes: int  # pretraining text taken from the corpus (0: all but the held-out part)
    dupe_factor: int
    suite_train: int  # built-in downstream tasks: examples per train / dev split
    suite_dev: int
    finetune_epochs: float
    finetune_lr: float  # the fine-tuning learning rate, unless finetune_lrs chooses one
    finetune_batch: int
    lstm_size: int  # "+ BiLSTM" and feature-based NER
    sizes: tuple[tuple[int, int, int], ...]  # Table 6 (L, H, A)
    eval_steps: int  # held-out pretraining batches (perplexity, NSP/SOP)
    seeds: int = 5  # fine-tuning seeds per pretraining run
    # Candidate fine-tuning rates: each arm's, per task, is chosen on a slice of train
    # (bert_jax.ablations.lr_choice), never on dev; () = finetune_lr for every arm.
    finetune_lrs: tuple[float, ...] = ()
    # Pretraining runs per arm (seeds 0..N-1): intervals then cover pretraining variance too.
    pretrain_seeds: int = 1
    # Fine-tuning dropout (hidden and attention), the paper's 0.1 whatever the pretraining's.
    finetune_dropout: float = 0.1
    # Pretraining dropout. Off for tiny models on short budgets: at `cpu` scale it cost a third
    # of the held-out masked-LM accuracy (README).
    dropout: float = 0.1
    phase2_steps: int = 0  # `tpu`: steps at `phase2_seq` after phase 1 (the paper's 10%)
    phase2_seq: int = 512
    dtype: str = "float32"  # of pretraining and fine-tuning runs
    # Passes over the pretraining text a run may make: above `warn_repetition` the run says so,
    # above `max_repetition` it is refused (0 = no limit; the cpu scale repeats ~30x by design).
    warn_repetition: float = 0.0
    max_repetition: float = 0.0
    # (task, epochs) where a task's budget differs from finetune_epochs: set on the slice of train
    # (never dev) for a task that the common budget teaches no arm.
    task_epochs: tuple[tuple[str, float], ...] = ()

    def epochs_for(self, task: str) -> float:
        """Fine-tuning epochs of `task` (`conll_feature` is its own task: its tagger trains at
        its own rate)."""
        return dict(self.task_epochs).get(task, self.finetune_epochs)


SCALES = {
    "quick": Scale(
        "quick", "L1-H64-A2", steps=16, seq=64, predictions=10, batch=16, learning_rate=1e-3,
        warmup=0, vocab_size=800, corpus_bytes=150_000, dupe_factor=1, suite_train=64,
        suite_dev=32, finetune_epochs=1.0, finetune_lr=1e-3, finetune_batch=16, lstm_size=16,
        sizes=((1, 32, 1), (1, 64, 2)), eval_steps=2, seeds=1, dropout=0.0,
        finetune_dropout=0.0,
    ),
    "cpu": Scale(
        "cpu", "L2-H128-A2", steps=10_000, seq=128, predictions=20, batch=32, learning_rate=1e-3,
        warmup=300, vocab_size=4000, corpus_bytes=0, dupe_factor=5, suite_train=2000,
        suite_dev=2000, finetune_epochs=3.0, finetune_lr=3e-4, finetune_batch=32, lstm_size=128,
        sizes=((1, 128, 2), (2, 128, 1), (2, 128, 2), (4, 128, 2), (4, 192, 3), (8, 192, 3)),
        eval_steps=20, seeds=5, dropout=0.0, pretrain_seeds=2, finetune_lrs=(3e-4, 1e-4, 5e-5),
        # The token task at 3 epochs (187 steps) stays all "O" in every arm at every rate, on
        # the slice of train too; there, at 3e-4, No NSP reached entity F1 2.3 at 10 epochs and
        # 19.2 at 30, random init 10.9 at 30. Its feature-based tagger (lr 1e-3) on No NSP:
        # 0.0 at 3 epochs, 38.5 at 30 (README, Measured).
        task_epochs=(("conll", 30.0), ("conll_feature", 30.0)),
    ),
    # BERT-small (L4-H512-A8): 1.23e13 training FLOPs per step of 1024 x 128 tokens (4 x 3.07e12
    # at 256), so 25k steps are 3.1e17 per arm and 3.3e9 tokens, as the 100k steps of 256 before
    # 2026-11-29: a corpus of about 1e9 tokens (4 GB of text) is seen three times. Table 6's grid
    # spans BERT-mini to BERT-small.
    # The recipe is the short-budget literature's (reference/variants.md 8, performance.md)
    # rather than the paper's batch of 256 (this scale's before 2026-11-29), at which a 4-layer
    # model leaves an accelerator mostly idle:
    # - 24hBERT (Izsak et al. 2021, IntelLabs/academic-budget-bert): batch 4096, peak 1e-3,
    #   linear warmup over 6% of the run then linear decay, seq 128, MLM only; its best run did
    #   ~22-23k steps (~95M sequences). Cramming (Geiping & Goldstein 2023, one GPU for 24h):
    #   peak 1e-3, batch ramped to ~4k (best for pretraining loss ~1536, for GLUE ~4032), no
    #   dropout in pretraining (0.1 again for fine-tuning). MosaicBERT: batch 4096 at 5e-4, 6%
    #   warmup, attention dropout 0.
    # - Batch 1024, not 4096: an arm reads 25.6M sequences, a quarter of 24hBERT's, and 4096
    #   would leave it 6250 steps; 1024 is below Cramming's loss-best 1536 for a smaller budget.
    #   Rate 1e-3 (both), warmup 6% (1500 steps), dropout 0: Cramming's, and at `cpu` scale
    #   dropout cost a third of the held-out masked-LM accuracy (README).
    # - Not taken: their AdamW b2 0.98 and pre-LN (Izsak et al.'s, for 1e-3 at 24 layers): the
    #   harness's AdamW keeps b2 0.999 and clip 1.0, the encoder is post-LN; at 4 layers the
    #   warmup and clip are what keep 1e-3 stable (not run at this scale here).
    # - Shrunk 16x (L2-H128-A2, 1500 steps of 16 at the old recipe against 375 of 64 at this
    #   one, the same 24k sequences, 3 seeds; experiments/ablations/host_recipe_curve.py,
    #   results/host_recipe_cpu_2026-11-29.json), held-out masked-LM accuracy new - old was
    #   -0.015 [-0.027, -0.002] after 6.4k sequences, -0.010 [-0.018, -0.001] after 12.8k and
    #   -0.006 [-0.013, +0.002] at the end (paired 95% t): per token the larger batch lags
    #   early and less as the run goes on, with both recipes still below the context-free bar
    #   (0.136). 375 steps are far from 25k; the case for 1024 is the literature's and the
    #   accelerator's throughput, which no CPU shows: a first host run can check one arm both
    #   ways (the old recipe is the flags in the module docstring).
    "host": Scale(
        "host", "L4-H512-A8", steps=25_000, seq=128, predictions=20, batch=1024,
        learning_rate=1e-3, warmup=1_500, dropout=0.0, vocab_size=30522, corpus_bytes=0,
        dupe_factor=5, suite_train=10_000, suite_dev=2_000, finetune_epochs=3.0, finetune_lr=1e-4,
        finetune_batch=32, lstm_size=256,
        sizes=((2, 256, 4), (4, 256, 4), (4, 512, 8), (8, 512, 8)), eval_steps=100, seeds=3,
        pretrain_seeds=2, dtype="bfloat16", warn_repetition=4.0, max_repetition=20.0,
        finetune_lrs=(3e-4, 1e-4, 5e-5),
    ),
    "tpu": Scale(
        "tpu", "L12-H768-A12", steps=900_000, seq=128, predictions=20, batch=256,
        learning_rate=1e-4, warmup=10_000, vocab_size=30522, corpus_bytes=0, dupe_factor=10,
        suite_train=0, suite_dev=0, finetune_epochs=3.0, finetune_lr=5e-5, finetune_batch=32,
        lstm_size=768, sizes=PAPER_SIZES, eval_steps=100, seeds=5, phase2_steps=100_000,
        dtype="bfloat16",
    ),
}  # fmt: skip


def mlm_steps_at_electra_flops(scale: Scale, electra_steps: int) -> int:
    """Masked-LM (no NSP) steps whose training FLOPs equal `electra_steps` ELECTRA steps of the
    same discriminator size, the generator counted (ELECTRA Table 1 gives BERT more steps)."""
    from bert_jax.arch.bert.flops import pretraining_flops_per_step
    from bert_jax.arch.electra.flops import electra_flops_per_step
    from bert_jax.arch.electra.model import DEFAULT_GENERATOR_SIZE
    from bert_jax.config import preset

    config = preset(scale.model, vocab_size=scale.vocab_size)
    args = (scale.batch, scale.seq, scale.predictions)
    electra = electra_flops_per_step(config, DEFAULT_GENERATOR_SIZE, *args)
    mlm = pretraining_flops_per_step(config, *args, use_nsp=False)
    return max(1, round(electra_steps * electra / mlm))
