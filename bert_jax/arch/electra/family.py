"""ELECTRA: a BERT-family discriminator trained with its masked-LM generator as one module
(`bert_jax.arch.electra.model`). Pretraining is its own (both networks, replaced-token detection);
loading and fine-tuning the discriminator are the BERT family's."""

from __future__ import annotations

from typing import Any, ClassVar

import jax

from bert_jax.arch.bert.family import BertFamily
from bert_jax.arch.bert.hf import export_hf
from bert_jax.arch.electra import flops
from bert_jax.arch.electra.model import ElectraForPreTraining, generator_config, generator_params


class ElectraFamily(BertFamily):
    name: ClassVar[str] = "electra"
    title: ClassVar[str] = "ELECTRA"
    workdir_entries: ClassVar[tuple[str, ...]] = ()  # its workdirs hold a "bert" entry
    variant_architecture: ClassVar[str] = "electra"
    masked_lm_is_the_model: ClassVar[bool] = False

    def pretraining_model(self, bert_config: Any, objective: Any, generator_size: float) -> Any:
        return ElectraForPreTraining(bert_config, generator_size)

    def pretraining_inputs(self, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
        # The model rebuilds the original tokens from the targets to sample its replacements.
        inputs = super().pretraining_inputs(batch)
        inputs.update({f"{k}_BxP": batch[k] for k in ("masked_lm_ids", "masked_lm_weights")})
        return inputs

    def pretraining_rngs(self, rng: jax.Array, deterministic: bool) -> dict[str, jax.Array]:
        # The generator samples in evaluation too.
        return super().pretraining_rngs(rng, deterministic) | {"sample": jax.random.fold_in(rng, 1)}

    def pretraining_flops(self, task: Any, global_batch_size: int) -> float:
        # Both networks, as ELECTRA's own FLOPs counting does.
        return flops.electra_flops_per_step(
            task.bert_config, task.model.generator_size, global_batch_size,
            task.max_seq_length, task.max_predictions_per_seq,
        )  # fmt: skip

    def export_pretrained(self, task: Any, params: Any, output_dir: str, vocab: Any) -> list[str]:
        out = export_hf(task.bert_config, params, output_dir, vocab_file=vocab)
        gen = export_generator(task, params, out / "generator", vocab)  # beside the discriminator
        return [f"exported Hugging Face model to {out}", f"exported the ELECTRA generator to {gen}"]


def export_generator(task: Any, params: Any, output_dir: Any, vocab_file: Any = None) -> Any:
    """An ELECTRA run's generator as transformers' ElectraForMaskedLM (the discriminator is the
    run's main export, ElectraForPreTraining)."""
    gen = generator_config(task.bert_config, task.model.generator_size)
    return export_hf(gen, generator_params(jax.device_get(params)), output_dir, vocab_file)
