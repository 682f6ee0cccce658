"""The protocol every architecture implements: what the pretraining task, the fine-tuning run,
the converters and the commands ask of a model family instead of branching on its name.

A family answers with its own code or says plainly that it has no such path (`unsupported`);
callers read the answer, never the family's name. Capabilities that change how shared code runs
are properties (`padding_side`, `task_kind`, `extracts_features`), not name checks.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax

from bert_jax.errors import BertJaxError

# Reasons several families give for a refusal (`Architecture.refusals`).
GENERATES = "generate decodes encoder-decoders and left-to-right (causal) BERTs"
STUDENT_IS_BERT = (
    "a student is a BERT-family or ModernBERT encoder (the cached rows are right-padded; XLNet "
    "reads left-padded ones)"
)
TEACHER_IS_BERT = (
    "a teacher is a fine-tuned BERT-family or ModernBERT model (the rows it labels are "
    "right-padded; XLNet reads left-padded ones)"
)


# Fine-tuning keys only BERT's heads and checkpoints serve (a "+ BiLSTM", frozen features, its
# bottom layers).
BERT_ONLY_KEYS = ("feature_based", "bilstm_size", "init_num_layers")


@dataclasses.dataclass(frozen=True)
class FineTuned:
    """A model with its task head, from a fine-tuning workdir or a Hugging Face directory (what
    a task-distillation teacher is read as)."""

    config: Any
    params: dict  # the task model's: unboxed, looped layers, float32
    task_family: str  # the head's: glue | ner | squad | swag ("": no task head)
    vocab_file: Any  # the tokenizer file (epath.Path), None if there is none
    do_lower_case: bool | None
    glue_task: str = ""  # the GLUE task, where a workdir records it
    label_names: tuple[str, ...] = ()  # a directory's id2label, in output order


class Architecture:
    """One architecture. Subclasses set the class attributes and override what they build."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""  # in messages: "BERT family", "XLNet", ...
    # Hugging Face `model_type`s and bert-jax workdir model entries (config.json keys) it reads
    # (an encoder variant's model_type is its name: bert_jax.arch.bert.variants says whose it is).
    hf_model_types: ClassVar[tuple[str, ...]] = ()
    workdir_entries: ClassVar[tuple[str, ...]] = ()
    # Its model config classes (`for_model_config`); BertConfig is the BERT family's.
    config_types: ClassVar[tuple[type, ...]] = ()
    # Its pretraining configs name encoder variants (config.family, bert_jax.arch.bert.variants)
    # whose `architecture` is this, the variant of that name by default ("" = none: it has its
    # own presets).
    variant_architecture: ClassVar[str] = ""
    # Its held-out masked-LM accuracy measures the model itself (ELECTRA's is its generator's).
    masked_lm_is_the_model: ClassVar[bool] = True
    # Which shape of run trains it: "encoder" (the pretraining task over the reference shards,
    # the encoder fine-tuning run) or "encoder_decoder" (inputs -> targets shards, text-to-text
    # runs).
    task_kind: ClassVar[str] = "encoder"
    # Fine-tuning rows reach the model padded on this side (XLNet's releases pad on the left).
    padding_side: ClassVar[str] = "right"
    extracts_features: ClassVar[bool] = False  # extract-features
    # The module that reads its features and attention maps (`extract`, `attention_map`,
    # `UNREAD`: bert_jax.runs.features imports it by this name when asked); "": none.
    features_reader: ClassVar[str] = ""
    # attention-map's kinds (`--attention`): "encoder" (self-attention over the text), "cross"
    # and "decoder" (an encoder-decoder's decoder over a target text); () = it draws none.
    attention_maps: ClassVar[tuple[str, ...]] = ()
    # How `bert-jax generate` decodes from it: "causal" (a left-to-right encoder), "seq2seq"
    # (encoder-decoder), "" (it does not generate).
    generates: ClassVar[str] = ""
    distills_students: ClassVar[bool] = False  # a task-distillation student (tasks.distill)
    distills_teachers: ClassVar[bool] = False  # a fine-tuned task-distillation teacher
    encoder_scope: ClassVar[str] = "bert"  # the encoder's parameters in its task models
    # `convert` writes its checkpoints with its own files (`convert` below); the rest convert
    # through the BERT encoder's formats (bert_jax.runs.export).
    converts_own_files: ClassVar[bool] = False

    # Why a command refuses this family where its capability above is off, keyed by the
    # command's name in `bert_jax.arch.table` (README's table and the commands' errors).
    refusals: ClassVar[dict[str, str]] = {}
    # Its fine-tuning heads by task: "classification" and "tagging" classes take (config,
    # num_labels), "multiple choice" and "span QA" classes take (config).
    task_heads: ClassVar[dict[str, Any]] = {}

    def unsupported(self, what: str) -> BertJaxError:
        return BertJaxError(f"{what}: not built for {self.title}")

    def refusal(self, command: str) -> str:
        """Why `command` refuses this family (its error says "<command>: <this>")."""
        return self.refusals.get(command, f"not built for {self.title}")

    # ---- pretraining (the encoder task, bert_jax.pretraining.task) --------------------------
    def pretraining_model(self, bert_config: Any, objective: Any, generator_size: float) -> Any:
        raise self.unsupported("pretraining")

    def pretraining_inputs(self, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """The model's keyword arguments from a batch of the objective's arrays."""
        names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
        inputs = {f"{k}_{_suffix(k)}": batch[k] for k in names if k in batch}
        if "pack_ids" in batch:  # packed shards: only packable objectives' models get here
            inputs["pack_BxL"] = batch["pack_ids"]
        return inputs

    def pretraining_rngs(self, rng: jax.Array, deterministic: bool) -> dict[str, jax.Array]:
        return {} if deterministic else {"dropout": rng}

    def pretraining_flops(self, task: Any, global_batch_size: int) -> float:
        raise self.unsupported("FLOPs counting")

    def pretraining_saved_elements(self, task: Any, global_batch_size: int) -> float | None:
        """Activation elements an ideally fused step keeps for its backward pass (the
        analytic minimum of `bert-jax compile`'s roofline); None: no formula for it."""
        return None

    def check_init_checkpoint(self, path: str) -> None:
        """Refuse an init checkpoint this family's pretraining cannot graft."""

    def export_pretrained(self, task: Any, params: Any, output_dir: str, vocab: Any) -> list[str]:
        """Write the trained model as its Hugging Face class; the lines to print."""
        raise self.unsupported("export_hf_dir")

    def convert(self, init_checkpoint: str, output_dir: str, task_labels: Any) -> str:
        """`bert-jax convert` of its checkpoint (a Hugging Face directory or a workdir, pretrained
        or fine-tuned) -> its transformers class in `output_dir`; the line to print.
        `task_labels(run)`: a fine-tuning run's (label names, problem_type)."""
        raise self.unsupported("convert")

    # ---- fine-tuning ------------------------------------------------------------------------
    def load_for_finetuning(self, cfg: Any) -> tuple[Any, Any, bool]:
        """(tokenizer, pretrained weights, do_lower_case) of cfg.init_checkpoint."""
        raise self.unsupported("fine-tuning")

    def workdir_record(self, pre: Any) -> dict[str, Any]:
        """The model entry a fine-tuning workdir's config.json keeps for `pre`."""
        return {"bert": pre.config.to_dict()}

    def refuse_bert_only_keys(self, cfg: Any, path: Any) -> None:
        """Fine-tuning keys that only BERT's heads and checkpoints serve, refused by name."""
        for key in BERT_ONLY_KEYS:
            if cfg.get(key):
                raise BertJaxError(f"config {key}: not built for {self.title} ({path} holds "
                                   f"a {self.title} checkpoint)")  # fmt: skip

    # One head class per task, by the task it serves (`task_heads`); a task not listed is
    # refused by name, and so is a "+ BiLSTM" (bilstm_size > 0). BERT overrides the four
    # methods below: its heads come with and without the BiLSTM.
    def _task_head(self, task: str, bilstm_size: int) -> Any:
        if task not in self.task_heads:
            raise self.unsupported(task)
        if bilstm_size:
            raise BertJaxError(f"bilstm_size: not built for {self.title} (its heads: "
                               f"{', '.join(self.task_heads)})")  # fmt: skip
        return self.task_heads[task]

    def classifier(self, config: Any, num_labels: int, bilstm_size: int = 0) -> Any:
        return self._task_head("classification", bilstm_size)(config, num_labels)

    def multiple_choice(self, config: Any, bilstm_size: int = 0) -> Any:
        return self._task_head("multiple choice", bilstm_size)(config)

    def tagger(self, config: Any, num_labels: int, bilstm_size: int = 0) -> Any:
        return self._task_head("tagging", bilstm_size)(config, num_labels)

    def span_model(self, config: Any, bilstm_size: int = 0) -> Any:
        return self._task_head("span QA", bilstm_size)(config)

    def encoder_flops_per_token(self, config: Any, seq_len: int) -> float:
        raise self.unsupported("FLOPs counting")

    # ---- task distillation (tasks.distill; `distills_teachers`) ------------------------------
    def fine_tuned(self, path: Any, step: int | None) -> FineTuned | None:
        """The model with its head at `path` (a fine-tuning workdir: its checkpoint at `step`,
        default the last; or a Hugging Face directory). None: a BertConfig model, which
        tasks.distill.teacher reads with the BERT family's loaders."""
        return None


def _suffix(key: str) -> str:
    return "BxP" if key.startswith("masked") else "BxL"
