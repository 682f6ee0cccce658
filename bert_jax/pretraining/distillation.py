"""DistilBERT-style distillation (Sanh et al. 2019) as a pretraining task of the one loop: a
frozen teacher (any `load_pretrained` source: a Hugging Face dir, a TF checkpoint, one of our
workdirs) runs forward inside the same jitted, sharded step as the student: its weights are the
`teacher` subtree of the params, sharded by the same rules, and `frozen_paths` tells the trainer
to give them no updates and no optimizer state; no gradient reaches its encoder.

    task = distillation_task(config)          # config.teacher = the teacher's path
    init = task.student_init                  # trainer.init_state(params=init)

Loss = 5 x KL(teacher || student) of the masked-LM distributions at temperature 2 (times T^2,
as the reference) + 2 x the student's masked-LM loss + 1 x the cosine loss (1 - cos) between the
last hidden states over real tokens: the weights of the released DistilBERT (HF #2013). The KL
is taken at the masked positions (the reference's --restrict_ce_to_mask), where the MLM head is
computed anyway.

The student is the teacher with every other layer (0, 2, 4, ...) and, for a BERT teacher,
DistilBERT's layout: no token types (the teacher's segment-0 embedding is folded into the
position table, so a single-segment input embeds exactly as in the teacher) and no pooler. A
teacher without a masked-LM head (e.g. the sentence-transformers MiniLM, a bare BertModel) gets
one fitted in the same step: a fresh head on the teacher's frozen encoder (decoding onto its
frozen table), trained by its own MLM loss, whose logits (without gradient) are the soft
targets.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from etils import epath

from bert_jax.arch.bert.heads import BertForPreTraining, MaskedLMHead
from bert_jax.arch.bert.model import BertModel
from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.arch.bert.variants import get_variant
from bert_jax.atomic_write import read_json
from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.input.geometry import RunShards, run_shards
from bert_jax.objectives import losses
from bert_jax.pretraining.settings import pretrain_settings
from bert_jax.pretraining.task import PretrainingTask
from bert_jax.train.task import Batch, Metrics

TEMPERATURE = 2.0
WEIGHTS = {"kl": 5.0, "mlm": 2.0, "cos": 1.0}


def student_config(teacher: BertConfig, num_layers: int | None = None) -> BertConfig:
    layers = num_layers or max(1, teacher.num_hidden_layers // 2)
    if layers > teacher.num_hidden_layers:
        raise BertJaxError(
            f"student_layers={layers}: the teacher has only {teacher.num_hidden_layers}"
        )
    if teacher.share_layers != "none":
        raise BertJaxError("distillation: a teacher with shared layers (ALBERT) has none to pick")
    cfg = teacher.replace(num_hidden_layers=layers)
    student = get_variant(teacher.family).distils_to
    if student and not teacher.causal:  # DistilBERT's student: no token types, no pooler
        cfg = cfg.replace(family=student, type_vocab_size=0, pooler=False)
    return cfg


def teacher_layers(teacher: BertConfig, student: BertConfig) -> list[int]:
    """Teacher layer of each student layer: every other one from the bottom (0, 2, 4, ...)."""
    step = teacher.num_hidden_layers / student.num_hidden_layers
    return [int(round(i * step)) for i in range(student.num_hidden_layers)]


class DistillationModel(nn.Module):
    """The student (`bert` + `predictions`, BertForPreTraining's layout) and the teacher
    (`teacher/bert`, frozen, and `teacher/predictions`, frozen when the checkpoint has it, else
    fitted on the frozen encoder)."""

    student: BertConfig
    teacher: BertConfig

    def setup(self) -> None:
        self.bert = BertModel(self.student, add_pooling_layer=False)
        self.predictions = MaskedLMHead(self.student)
        self.teacher_model = BertForPreTraining(self.teacher, use_nsp=False, name="teacher")

    def __call__(
        self,
        input_ids_BxL: jax.Array,
        input_mask_BxL: jax.Array,
        segment_ids_BxL: jax.Array,
        masked_lm_positions_BxP: jax.Array,
        *,
        deterministic: bool = True,
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        out = self.bert(input_ids_BxL, input_mask_BxL, segment_ids_BxL, deterministic=deterministic)
        x_BxPxD = jnp.take_along_axis(out.sequence_output, masked_lm_positions_BxP[..., None], 1)
        student_BxPxV = self.predictions(x_BxPxD, self.bert)
        teacher = self.teacher_model
        # Frozen and deterministic; no gradient reaches the teacher's encoder.
        t_seq_BxLxD = jax.lax.stop_gradient(
            teacher.bert(input_ids_BxL, input_mask_BxL, segment_ids_BxL).sequence_output
        )
        t_x_BxPxD = jnp.take_along_axis(t_seq_BxLxD, masked_lm_positions_BxP[..., None], 1)
        teacher_BxPxV = teacher.predictions(t_x_BxPxD, teacher.bert)
        return out.sequence_output, student_BxPxV, t_seq_BxLxD, teacher_BxPxV


@dataclasses.dataclass
class DistillationTask(PretrainingTask):
    teacher_config: BertConfig | None = None
    teacher_params: Any = None  # looped, unboxed; `bert` and maybe `predictions`

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.spec.heads != ("mlm",):  # not NSP/SOP, ELECTRA, next-token or XLNet
            raise BertJaxError(
                f"distillation trains masked LM: objective {self.spec.name} is not mlm or "
                "full_sentences"
            )
        self.fit_teacher_head = "predictions" not in self.teacher_params
        self.model = DistillationModel(self.bert_config, self.teacher_config)
        # The trainer gives these no updates and no optimizer state.
        self.frozen_paths = (("teacher", "bert"),)
        if not self.fit_teacher_head:
            self.frozen_paths += (("teacher", "predictions"),)

    def loss_fn(
        self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Metrics]:
        seq_BxLxD, student_BxPxV, t_seq_BxLxD, head_BxPxV = self.model.apply(
            {"params": params}, batch["input_ids"], batch["input_mask"], batch["segment_ids"],
            batch["masked_lm_positions"], deterministic=deterministic,
            rngs=None if deterministic else {"dropout": rng},
        )  # fmt: skip
        ids_BxP, weights_BxP = batch["masked_lm_ids"], batch["masked_lm_weights"]
        denom = losses._given_denominator(batch, "masked_lm")
        mlm, metrics = losses.masked_lm_loss(student_BxPxV, ids_BxP, weights_BxP, denom)
        total = jnp.zeros((), jnp.float32)
        if self.fit_teacher_head:  # trains only the teacher's head (its input is constant)
            head_loss, _ = losses.masked_lm_loss(head_BxPxV, ids_BxP, weights_BxP, denom)
            metrics["teacher_head_loss"] = head_loss
            total = total + head_loss
        teacher_BxPxV = jax.lax.stop_gradient(head_BxPxV)
        kl = distillation_kl(student_BxPxV, teacher_BxPxV, weights_BxP, denom)
        token_denom = losses._given_denominator(batch, "token")
        cos = cosine_loss(seq_BxLxD, t_seq_BxLxD, batch, token_denom)
        distill = WEIGHTS["kl"] * kl + WEIGHTS["mlm"] * mlm + WEIGHTS["cos"] * cos
        metrics.update(distill_kl=kl, distill_cos=cos, distill_loss=distill)
        total = total + distill
        metrics["loss"] = total
        return total, metrics

    def flops_per_step(self, global_batch_size: int) -> float:
        from bert_jax.arch.bert import flops

        student = super().flops_per_step(global_batch_size)
        # The teacher runs forward only: a third of its forward + backward count.
        teacher = flops.pretraining_flops_per_step(
            self.teacher_config, global_batch_size, self.max_seq_length,
            self.max_predictions_per_seq, use_nsp=False,
        )  # fmt: skip
        return student + teacher / 3.0

    def student_init(self, fresh: Any) -> Any:
        """fresh params (ShapeDtypeStructs) -> the teacher's weights and the student from them."""
        return init_student(fresh, self.teacher_config, self.bert_config, self.teacher_params)


def distillation_kl(
    student_BxPxV: jax.Array, teacher_BxPxV: jax.Array, weights_BxP: jax.Array, denom=None
) -> jax.Array:
    """KL(teacher_T || student_T) x T^2 per masked position, weighted mean."""
    t = TEMPERATURE
    log_p_s = jax.nn.log_softmax(student_BxPxV.astype(jnp.float32) / t, -1)
    log_p_t = jax.nn.log_softmax(teacher_BxPxV.astype(jnp.float32) / t, -1)
    kl_BxP = jnp.sum(jnp.exp(log_p_t) * (log_p_t - log_p_s), -1) * t * t
    weights_BxP = weights_BxP.astype(jnp.float32)
    if denom is None:
        denom = jnp.sum(weights_BxP) + 1e-5
    return jnp.sum(kl_BxP * weights_BxP) / denom


def cosine_loss(
    student_BxLxD: jax.Array, teacher_BxLxD: jax.Array, batch, denom=None
) -> jax.Array:
    """Mean over real tokens of 1 - cos(student, teacher) of the last hidden states."""
    cos_BxL = optax.cosine_similarity(
        student_BxLxD.astype(jnp.float32), teacher_BxLxD.astype(jnp.float32), epsilon=1e-8
    )
    weights_BxL = losses._token_weights(batch)
    if denom is None:
        denom = jnp.sum(weights_BxL) + 1e-5
    return jnp.sum((1.0 - cos_BxL) * weights_BxL) / denom


def init_student(fresh: Any, teacher: BertConfig, student: BertConfig, tp: dict) -> Any:
    """Fresh params (ShapeDtypeStructs) -> the teacher's weights under `teacher`, and the student
    from them: embeddings (segment 0 folded into the positions when the student has no token
    types), layers `teacher_layers`, the MLM head if the teacher has one. Leaves without a
    counterpart keep their fresh initialisation."""
    from bert_jax.model.scan import stack_layers

    emb_t = dict(tp["bert"]["embeddings"])
    if not student.type_vocab_size and teacher.type_vocab_size:
        pos = np.asarray(emb_t["position_embeddings"]["embedding"])
        seg0 = np.asarray(emb_t["token_type_embeddings"]["embedding"])[0]
        emb_t["position_embeddings"] = {"embedding": pos + seg0[None, :]}
        del emb_t["token_type_embeddings"]
    encoder = {
        f"layer_{i}": tp["bert"]["encoder"][f"layer_{j}"]
        for i, j in enumerate(teacher_layers(teacher, student))
    }
    if student.scan_layers:
        encoder = stack_layers({"encoder": encoder})["encoder"]
    out = dict(fresh)
    out["bert"] = _fill(fresh["bert"], {"embeddings": emb_t, "encoder": encoder}, "bert")
    if "predictions" in tp:
        out["predictions"] = _fill(fresh["predictions"], tp["predictions"], "predictions")
    out["teacher"] = _fill(fresh["teacher"], tp, "teacher")
    return out


def _fill(fresh: Any, given: Any, path: str) -> Any:
    """`fresh` with the leaves `given` has (same shapes); extra keys of `given` (a pooler, an NSP
    head) are ignored."""
    if isinstance(fresh, dict):
        if not isinstance(given, dict):
            return fresh
        return {k: _fill(v, given[k], f"{path}/{k}") if k in given else v
                for k, v in fresh.items()}  # fmt: skip
    value = np.asarray(given, np.float32)
    if value.shape != tuple(fresh.shape):
        raise BertJaxError(f"teacher {path}: shape {value.shape}, the model has {fresh.shape}")
    return value


def teacher_config_only(path: str) -> BertConfig:
    """The teacher's model config without its weights (compiling the step ahead of time needs
    shapes only): a Hugging Face dir's config.json or a bert-jax workdir's."""
    from bert_jax.arch.bert.hf_configs import config_from_hf
    from bert_jax.checkpoint import read_workdir_config

    directory = epath.Path(path)
    if (directory / "checkpoints").is_dir():
        raw = read_workdir_config(directory)
        if "bert" in raw:
            return BertConfig.from_dict(raw["bert"], source=str(directory / "config.json"))
    config_file = directory / "config.json"
    return config_from_hf(read_json(config_file, f"{config_file}: no such teacher config"),
                          str(config_file))  # fmt: skip


# A teacher's embedding table may be padded past its vocabulary (to a multiple of 8 or 64).
_TABLE_PADDING = 128


def _vocab_tokens(path: Any) -> dict[str, int] | None:
    from bert_jax.tokenization.vocab import load_vocab

    if not path or not epath.Path(path).exists():
        return None
    return dict(load_vocab(path))


def check_teacher_vocab(
    config: Any, teacher_vocab: Any, teacher_table: int, shards: RunShards | None = None
) -> None:
    """The student reads the very ids the teacher does: the run's vocab_file and the shards'
    (their stats.json) must be the teacher's vocabulary, or the teacher scores text it never
    saw as other words (a silent, wrong run). Raised naming both vocabularies."""
    teacher = _vocab_tokens(teacher_vocab)
    size = max(teacher.values()) + 1 if teacher else teacher_table
    name = f"{teacher_vocab} ({size} tokens)" if teacher else f"a {teacher_table}-row table"
    fix = "give the vocab_file the teacher was trained with, and shards written with it"
    if teacher:
        fix = (f"give --config.vocab_file={teacher_vocab} and write the shards with "
               f"create-pretraining-data --vocab_file={teacher_vocab}")  # fmt: skip
    s = pretrain_settings(config)
    where = f"config.teacher={s.teacher}"

    def refuse(what: str, path: Any, n: int) -> None:
        raise BertJaxError(
            f"{where}: the teacher's vocabulary is {name}, {what} is {path} ({n} tokens): the "
            f"student reads the teacher's ids, so they must be the same vocabulary; {fix}"
        )

    def differs(tokens: dict[str, int] | None, n: int) -> bool:
        if teacher is not None and tokens is not None:
            return tokens != teacher
        return n > size if teacher is not None else not 0 <= size - n < _TABLE_PADDING

    if s.vocab_file:
        tokens = _vocab_tokens(s.vocab_file)
        n = max(tokens.values()) + 1 if tokens else 0
        if tokens is not None and differs(tokens, n):
            refuse("config.vocab_file", s.vocab_file, n)
    for record in run_shards(s, shards):
        path, settings = record.path, record.settings
        n = settings.get("vocab_size")
        if n is None:
            continue
        tokens = _vocab_tokens(settings.get("vocab_file"))
        if (tokens is None and teacher is not None and n != size) or differs(tokens, int(n)):
            refuse(f"the shards' ({path})", settings.get("vocab_file", "their vocab"), int(n))


def distillation_task(
    config: Any, shapes_only: bool = False, shards: RunShards | None = None
) -> DistillationTask:
    """From a pretraining config with `teacher` (a load_pretrained path) and optionally
    `student_layers` (0 = half the teacher's). `shapes_only` reads the teacher's config and no
    weights, for compiling the step (the teacher is taken to have its masked-LM head, as the
    paper's BERT-base teacher has). `shards`: the run's stats.json records (read when None)."""
    from bert_jax.pretraining.task import pretraining_task

    s = pretrain_settings(config)
    if shapes_only:
        pre_config, teacher_params = teacher_config_only(s.teacher), {"predictions": None}
        teacher_vocab = epath.Path(s.teacher) / "vocab.txt"
    else:
        pre = load_pretrained(s.teacher)
        pre_config, teacher_params, teacher_vocab = pre.config, pre.params, pre.vocab_file
    check_teacher_vocab(s, teacher_vocab, pre_config.vocab_size, shards)
    teacher = pre_config.replace(dtype=s.dtype, scan_layers=False)
    student = student_config(teacher, s.student_layers or None).replace(
        scan_layers=s.scan_layers, remat_policy=s.remat_policy,
        hidden_dropout_prob=s.hidden_dropout_prob,
        attention_probs_dropout_prob=s.attention_probs_dropout_prob,
    )  # fmt: skip
    base = pretraining_task(s, student)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(PretrainingTask)}
    return DistillationTask(**fields, teacher_config=teacher, teacher_params=teacher_params)
