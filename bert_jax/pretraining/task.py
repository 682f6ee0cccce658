"""Pretraining as a `Task`: the objective (from `bert_jax.objectives`) decides the heads, the
batch arrays and the loss; this module wires them to BertForPreTraining, the input pipeline and
evaluation.

    task = pretraining_task(config, bert_config_from(config))   # a config or its PretrainSettings

Batch keys are the objective's shard features (ids as int32, next_sentence_labels squeezed to
[B]) plus `example_mask` (B; 0 = eval padding, which has zero masked_lm_weights and is left out
of the sentence loss).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import jax
import numpy as np

from bert_jax import objectives
from bert_jax.arch import registry
from bert_jax.arch.bert.variants import get_variant
from bert_jax.arch.electra.model import DEFAULT_GENERATOR_SIZE
from bert_jax.config import BertConfig, preset
from bert_jax.errors import BertJaxError
from bert_jax.input import EvalInput, PretrainInput
from bert_jax.input.geometry import RunShards, train_record
from bert_jax.objectives.masking import MaskingSpec
from bert_jax.pretraining.settings import PretrainSettings, pretrain_settings
from bert_jax.tokenization.vocab import load_vocab
from bert_jax.train.task import Batch, Metrics

BERT_VOCAB_SIZE = 30522  # the training config's default vocab_size (bert_jax.train.config)


@dataclasses.dataclass
class PretrainingTask:
    bert_config: BertConfig
    global_batch_size: int
    max_seq_length: int
    max_predictions_per_seq: int
    objective: str = "mlm_nsp"
    # Input (bert_jax.input); only needed by train_input / evaluate.
    train_files: Any = None
    eval_files: Any = None
    seed: int = 0
    dynamic_masking: MaskingSpec | None = None  # None: the shards carry static masks
    eval_batch_size: int | None = None
    max_eval_steps: int = 100
    generator_size: float = DEFAULT_GENERATOR_SIZE  # ELECTRA: generator width / discriminator's
    # Instances per row of packed shards (create-pretraining-data --pack_sequences); 1 = unpacked.
    pack_sequences: int = 1

    def __post_init__(self) -> None:
        self.spec = objectives.get(self.objective)
        objectives.check_pack_sequences(self.spec.name, self.pack_sequences)
        if self.spec.causal != self.bert_config.causal:
            # A bidirectional encoder would see the very token it is asked to predict.
            raise BertJaxError(
                f"objective {self.spec.name} needs BertConfig.causal={self.spec.causal}, the "
                f"model has causal={self.bert_config.causal}"
            )
        # The objective names its family; the family builds the model (ELECTRA's generator and
        # discriminator as one module, XLNet's two-stream LM, BERT's heads).
        self.family = registry.get(self.spec.architecture)
        self.model = self.family.pretraining_model(self.bert_config, self.spec, self.generator_size)
        if self.pack_sequences > 1 and self.uses_sentence_head:  # one NSP/SOP label per slot
            self.model = self.model.clone(max_sequences=self.pack_sequences)

    @property
    def uses_sentence_head(self) -> bool:
        return self.spec.sentence_head is not None

    def init_inputs(self) -> dict[str, jax.ShapeDtypeStruct]:
        shapes = self.spec.batch_shapes(
            self.global_batch_size, self.max_seq_length, self.max_predictions_per_seq,
            self.pack_sequences,
        )  # fmt: skip
        return {k: jax.ShapeDtypeStruct(shape, dtype) for k, (shape, dtype) in shapes.items()}

    def model_inputs(self, batch: Batch) -> dict[str, jax.Array]:
        # Without masked_lm_positions (next-token objectives) the LM head sees every position.
        return self.family.pretraining_inputs(batch)

    def loss_fn(
        self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Metrics]:
        out = self.model.apply(
            {"params": params},
            **self.model_inputs(batch),
            deterministic=deterministic,
            rngs=self.family.pretraining_rngs(rng, deterministic) or None,
        )
        return self.spec.loss(out, batch)

    def loss_denominators(self, batch: Batch) -> dict[str, jax.Array]:
        from bert_jax.objectives import losses

        return losses.full_batch_denominators(batch)

    def flops_per_step(self, global_batch_size: int) -> float:
        return self.family.pretraining_flops(self, global_batch_size)

    def saved_elements(self, global_batch_size: int) -> float | None:
        return self.family.pretraining_saved_elements(self, global_batch_size)

    def tokens_per_step(self, global_batch_size: int) -> int:
        return global_batch_size * self.max_seq_length

    # ---- input and eval --------------------------------------------------------------------
    def train_input(self, trainer: Any) -> PretrainInput:
        if not self.train_files:
            raise BertJaxError("config.train_files is empty: give TFRecord shard globs")
        return PretrainInput(
            self.train_files,
            self.global_batch_size,
            self.max_seq_length,
            self.max_predictions_per_seq,
            seed=self.seed,
            sharding=trainer.batch_shardings["input_ids"],
            dynamic_masking=self.dynamic_masking,
            objective=self.objective,
            vocab_size=self.bert_config.vocab_size,
            pack_sequences=self.pack_sequences,
        )

    def eval_input(self, trainer: Any) -> EvalInput:
        """One ordered pass over the held-out shards: the same examples, in the same order, for
        every model that reads them (masks drawn with `seed`). `evaluate` scores the first
        `max_eval_steps` batches."""
        return EvalInput(
            self.eval_files,
            self.eval_batch_size or self.global_batch_size,
            self.max_seq_length,
            self.max_predictions_per_seq,
            sharding=trainer.batch_shardings["input_ids"],
            dynamic_masking=self.dynamic_masking,
            seed=self.seed,
            objective=self.objective,
            vocab_size=self.bert_config.vocab_size,
            pack_sequences=self.pack_sequences,
        )

    def evaluate(self, trainer: Any, params: Any) -> dict[str, float]:
        """Metrics over (at most `max_eval_steps` batches of) the held-out shards, weighted as the
        reference's tf.metrics: token metrics by the predicted tokens, sentence metrics by real
        examples."""
        from bert_jax.objectives import losses

        if not self.eval_files:
            return {}
        keys = list(trainer.batch_shardings)
        sums: dict[str, float] = {}
        weights: dict[str, float] = {}
        for batch in itertools.islice(self.eval_input(trainer), self.max_eval_steps):
            m = jax.device_get(trainer.eval_step(params, {k: batch[k] for k in keys}))
            w_tokens = self.spec.predicted_tokens(jax.device_get(batch))
            w_ex = float(np.sum(jax.device_get(
                losses.sentence_weights(batch) if "next_sentence_labels" in batch
                else batch["example_mask"]
            )))  # fmt: skip
            mask_BxL = np.asarray(jax.device_get(batch["input_mask"]), np.float64)
            real_B = np.asarray(jax.device_get(batch["example_mask"]), np.float64)
            w_real = float(np.sum(mask_BxL * real_B[:, None]))
            sentence = self.spec.sentence_head or "-"
            for k, v in m.items():
                w = w_ex if k.startswith(sentence) else w_tokens
                w = w_real if k.startswith("replaced_token") else w
                sums[k] = sums.get(k, 0.0) + float(v) * w
                weights[k] = weights.get(k, 0.0) + w
        out = {k: sums[k] / max(weights[k], 1e-9) for k in sums}
        # The total is the sum of the terms' weighted means (a per-batch mean would mix weights).
        terms = [v for k, v in out.items() if k.endswith("_loss")]
        if terms:
            out["loss"] = float(sum(terms))
        return out


def synthetic_batch(task: PretrainingTask, seed: int, batch_size: int | None = None) -> dict:
    """A random (numpy) batch of the task's arrays, for smoke runs and AOT tests."""
    rs = np.random.RandomState(seed)
    b = batch_size or task.global_batch_size
    n, p, v = task.max_seq_length, task.max_predictions_per_seq, task.bert_config.vocab_size
    ids = rs.randint(5, v, size=(b, n)).astype(np.int32)
    pos = np.stack([np.sort(rs.choice(np.arange(1, n), p, replace=False)) for _ in range(b)])
    values = {
        "input_ids": ids,
        "input_mask": np.ones((b, n), np.int32),
        "segment_ids": (np.arange(n)[None] >= n // 2).astype(np.int32).repeat(b, 0),
        "masked_lm_positions": pos.astype(np.int32),
        "masked_lm_ids": np.take_along_axis(ids, pos, 1).astype(np.int32),
        "masked_lm_weights": np.ones((b, p), np.float32),
        "next_sentence_labels": rs.randint(0, 2, size=(b,)).astype(np.int32),
        "example_mask": np.ones((b,), np.float32),
    }
    if task.pack_sequences > 1:  # two instances per row, the second from mid-row
        values["pack_ids"] = 1 + (np.arange(n)[None] >= n // 2).astype(np.int32).repeat(b, 0)
        labels = rs.randint(0, 2, size=(b, task.pack_sequences)).astype(np.int32)
        values["next_sentence_labels"] = labels * (np.arange(task.pack_sequences) < 2)
    if task.spec.layout is not None:  # e.g. XLNet's: it draws its own targets and masks
        values.update(task.spec.layout.apply(values, np.arange(b), p, seed))
    return {k: values[k] for k in task.spec.batch_shapes(b, n, p, task.pack_sequences)}


# ---- from a pretraining config (bert_jax.train.config.pretrain_config) ------------------------


def _files(value: Any) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


# Variant switches that are sizes: the `model` preset and the vocab decide them, not the family.
_SIZE_FIELDS = ("vocab_size", "max_position_embeddings", "num_hidden_layers")


def _require_geometry(s: PretrainSettings) -> None:
    """pretrain_cpu.py leaves the geometry to the shards (runs.pretrain fills it in from them);
    without shards (compiling ahead of time, say) it must be given."""
    for key in ("max_seq_length", "max_predictions_per_seq"):
        if getattr(s, key) is None:
            raise BertJaxError(
                f"config.{key} is not set (it is the shards' when training): add --config.{key}=N"
            )


def _check_default_vocab_size(
    s: PretrainSettings, vocab_size: int, shards: RunShards | None
) -> None:
    """Without a vocab_file the table takes config.vocab_size; left at BERT's 30522 over shards
    whose stats.json names another vocab, that is a model no vocab fits (a larger size set on
    purpose, e.g. padded, stays allowed)."""
    if vocab_size != BERT_VOCAB_SIZE:
        return
    train = train_record(s, shards)
    if train is None:
        return
    saved = train.settings.get("vocab_size")
    if saved is not None and int(saved) != vocab_size:
        fix = train.settings.get("vocab_file") or "VOCAB (the vocab the shards were written with)"
        raise BertJaxError(
            f"{train.path}: the shards were written with a {saved}-token vocab, and without "
            f"config.vocab_file the model would have BERT's {vocab_size} rows: add "
            f"--config.vocab_file={fix}"
        )


def bert_config_from(config: Any, shards: RunShards | None = None) -> BertConfig:
    """The encoder a pretraining config (or its PretrainSettings) trains; `shards`: the run's
    stats.json records (read here when None)."""
    s = pretrain_settings(config)
    _require_geometry(s)
    vocab_size = s.vocab_size
    if s.vocab_file:
        # Ids are line numbers: a repeated token keeps its last id, so the table needs the highest
        # id + 1 rows, not len(vocab) (which would leave the last ids outside it).
        vocab_size = max(load_vocab(s.vocab_file).values()) + 1
    else:
        _check_default_vocab_size(s, vocab_size, shards)
    family = get_variant(str(s.family))
    registry.check_preset(family.name, s.objective)
    switches = {k: v for k, v in family.switches.items() if k not in _SIZE_FIELDS}
    if s.embedding_size is not None:
        switches["embedding_size"] = s.embedding_size
    if s.intermediate_size is not None:  # e.g. ModernBERT's GeGLU widths
        switches["intermediate_size"] = s.intermediate_size
    if s.hidden_act is not None:
        switches["hidden_act"] = s.hidden_act
    offset = int(switches.get("position_offset", 0))
    # The config's dropout wins over the family's (the recipe configs set the family's values).
    return preset(
        s.model,
        **{
            **switches,
            "family": family.name,
            "vocab_size": vocab_size,
            "max_position_embeddings": max(512, int(s.max_seq_length)) + offset,
            "dtype": s.dtype,
            "scan_layers": s.scan_layers,
            "remat_policy": s.remat_policy,
            "attention_implementation": s.attention_implementation,
            "hidden_dropout_prob": s.hidden_dropout_prob,
            "attention_probs_dropout_prob": s.attention_probs_dropout_prob,
            "causal": objectives.get(s.objective).causal,
        },
    )


def _masking(s: PretrainSettings, spec: Any) -> MaskingSpec | None:
    """The masks the run draws itself (dynamic masking), or the word boundaries an objective
    with its own layout reads; None: the shards' static masks."""
    mix = {k: getattr(s, k) for k in ("mask_prob", "random_prob") if getattr(s, k) is not None}
    if mix and not s.dynamic_masking:
        raise BertJaxError(
            "config.mask_prob/random_prob apply to dynamic masking: set dynamic_masking=True, "
            "or give the mix to create-pretraining-data (--mask_prob/--random_prob) for static "
            "shards"
        )
    if s.dynamic_masking:
        if not s.vocab_file:
            raise BertJaxError("dynamic_masking needs config.vocab_file ([MASK] and specials)")
        if spec.masking is None:
            raise BertJaxError(f"objective {spec.name} masks no tokens: turn dynamic_masking off")
        rule = dataclasses.replace(spec.masking, **mix)
        return MaskingSpec.from_vocab_file(s.vocab_file, s.masked_lm_prob, rule=rule)
    if spec.layout is not None and s.vocab_file:
        return MaskingSpec.from_vocab_file(s.vocab_file)  # word boundaries ("##")
    return None


def pretraining_task(config: Any, bert_config: BertConfig) -> PretrainingTask:
    """The task of a pretraining config (or its PretrainSettings) for the encoder `bert_config`."""
    s = pretrain_settings(config)
    _require_geometry(s)
    spec = objectives.get(s.objective)
    return PretrainingTask(
        bert_config,
        s.global_batch_size,
        int(s.max_seq_length),
        int(s.max_predictions_per_seq),
        objective=spec.name,
        train_files=_files(s.train_files),
        eval_files=_files(s.eval_files),
        seed=s.seed,
        dynamic_masking=_masking(s, spec),
        eval_batch_size=s.eval_batch_size or None,
        max_eval_steps=s.max_eval_steps,
        generator_size=s.generator_size,
        pack_sequences=s.pack_sequences or 1,
    )
