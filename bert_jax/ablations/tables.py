"""The paper's ablation tables as data: each table is a list of arms, each arm a pretraining run
(objective, model, masking mix, steps) plus how it is fine-tuned, and the tasks it is scored on.

Arm and task names are the paper's (and the JSON's keys, which scripts read: keep them stable).
Pretraining runs are keyed by what determines them (`Pretrain.key`), so arms of different tables
that share a run (Table 5's "BERT" is Table 8's "80/10/10" and the NSP/SOP table's "NSP") train
it once.
"""

from __future__ import annotations

import dataclasses
import re

# The paper's numbers (bert_reference.md / variants.md): Table 5 and Table 8 dev results, and
# ALBERT's intrinsic NSP/SOP accuracies. Our CPU tasks are stand-ins: "mrpc" (a sentence-pair
# task) is compared with MRPC in Table 5 and with MNLI in Table 8 and Figure 5.
PAPER = {
    "5": {
        "BERT": {"sst2": 92.7, "mrpc": 86.7, "squad": 88.5},
        "No NSP": {"sst2": 92.6, "mrpc": 86.5, "squad": 87.9},
        "LTR & No NSP": {"sst2": 92.1, "mrpc": 77.5, "squad": 77.8},
        "+ BiLSTM": {"sst2": 91.6, "mrpc": 75.7, "squad": 84.9},
    },
    "8": {
        "80/10/10": {"mrpc": 84.2, "conll": 95.4, "conll_feature": 94.9},
        "100/0/0": {"mrpc": 84.3, "conll": 94.9, "conll_feature": 94.0},
        "80/0/20": {"mrpc": 84.1, "conll": 95.2, "conll_feature": 94.6},
        "80/20/0": {"mrpc": 84.4, "conll": 95.2, "conll_feature": 94.7},
        "0/20/80": {"mrpc": 83.7, "conll": 94.8, "conll_feature": 94.6},
        "0/0/100": {"mrpc": 83.6, "conll": 94.9, "conll_feature": 94.6},
    },
    # ELECTRA Table 1 reports the GLUE dev average only (small models, equal FLOPs): BERT-Small
    # 75.1, ELECTRA-Small 79.9; not per task, so no cell carries a paper number.
    "electra": {},
    "nsp_sop": {
        "none": {"nsp": 52.4, "sop": 53.3},
        "NSP": {"nsp": 90.5, "sop": 52.0},
        "SOP": {"nsp": 78.9, "sop": 86.5},
    },
    # Table 6 perplexities, by the paper's (L, H, A).
    "6": {
        "L=3,H=768,A=12": {"mlm_ppl": 5.84, "sst2": 88.4, "mrpc": 79.8},
        "L=6,H=768,A=3": {"mlm_ppl": 5.24, "sst2": 90.7, "mrpc": 82.2},
        "L=6,H=768,A=12": {"mlm_ppl": 4.68, "sst2": 91.3, "mrpc": 84.8},
        "L=12,H=768,A=12": {"mlm_ppl": 3.99, "sst2": 92.9, "mrpc": 86.7},
        "L=12,H=1024,A=16": {"mlm_ppl": 3.54, "sst2": 93.3, "mrpc": 86.9},
        "L=24,H=1024,A=16": {"mlm_ppl": 3.23, "sst2": 93.7, "mrpc": 87.8},
    },
}
TABLES = ("5", "6", "8", "fig5", "nsp_sop", "electra")
MIXES = ("80/10/10", "100/0/0", "80/0/20", "80/20/0", "0/20/80", "0/0/100")
PAPER_SIZES = ((3, 768, 12), (6, 768, 3), (6, 768, 12), (12, 768, 12), (12, 1024, 16),
               (24, 1024, 16))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Pretrain:
    """One pretraining run. `steps` 0 = no training: the model at its random initialisation."""

    objective: str
    model: str  # a preset name or "L<l>-H<h>-A<a>"
    steps: int
    mix: str = "80/10/10"

    @property
    def family(self) -> str:
        """ELECTRA's objective trains its own model family (discriminator + generator)."""
        return "electra" if self.objective == "electra" else "bert"

    @property
    def mask_and_random_prob(self) -> tuple[float, float]:
        """The mix, written MASK/SAME/RND as in the paper's Table 8, as the (mask_prob,
        random_prob) of the data pipeline: "80/0/20" -> (0.8, 0.2); SAME is the rest."""
        mask, same, rnd = (int(x) for x in self.mix.split("/"))
        if mask + same + rnd != 100:
            raise ValueError(f"masking mix {self.mix!r}: MASK/SAME/RND must add up to 100")
        return mask / 100, rnd / 100

    @property
    def key(self) -> str:
        if not self.steps:
            return f"random-{self.model}-{self.objective}"
        return f"{self.objective}-{self.model}-{self.mix.replace('/', '.')}-s{self.steps}"


# Tasks scored on the pretrained model itself (no fine-tuning, one run per arm).
INTRINSIC = ("mlm_ppl", "nsp", "sop")


@dataclasses.dataclass(frozen=True)
class Arm:
    name: str
    pretrain: Pretrain
    tasks: tuple[str, ...]  # suite kinds, "conll_feature", "mlm_ppl", "nsp", "sop"
    bilstm: bool = False  # a BiLSTM between the encoder and the task head, at fine-tuning
    step: int | None = None  # fine-tune the checkpoint of this step (Figure 5); None = last


def size_name(layers: int, hidden: int, heads: int) -> str:
    return f"L={layers},H={hidden},A={heads}"


def stack_size(name: str) -> tuple[int, int]:
    """A Table 6 arm's (encoder-stack parameters 12 L H^2, heads), from its `size_name`: the
    paper's order of sizes, more heads counting as bigger at equal parameters."""
    layers, hidden, heads = (int(x) for x in re.findall(r"\d+", name))
    return 12 * layers * hidden**2, heads


def arms(
    table: str, model: str, steps: int, sizes: tuple[tuple[int, int, int], ...],
    mlm_steps: int = 0,
) -> list[Arm]:  # fmt: skip
    """The arms of `table` at a scale: `model` and `steps` size the pretraining runs, `sizes`
    is Table 6's (L, H, A) grid at this scale; `mlm_steps` are the masked-LM steps with the
    training FLOPs of `steps` ELECTRA steps (ablations.scales.mlm_steps_at_electra_flops)."""
    tasks = ("sst2", "mrpc", "conll", "squad")
    bert = Pretrain("mlm_nsp", model, steps)
    ltr = Pretrain("ltr", model, steps)
    if table == "5":
        return [
            Arm("BERT", bert, tasks),
            Arm("No NSP", Pretrain("mlm", model, steps), tasks),
            Arm("LTR & No NSP", ltr, tasks),
            Arm("+ BiLSTM", ltr, tasks, bilstm=True),
            Arm("random init", Pretrain("mlm_nsp", model, 0), tasks),
        ]
    if table == "8":
        mixed = [Arm(m, Pretrain("mlm_nsp", model, steps, m), ("mrpc", "conll", "conll_feature"))
                 for m in MIXES]  # fmt: skip
        return [*mixed, Arm("random init", Pretrain("mlm_nsp", model, 0), ("mrpc", "conll"))]
    if table == "6":
        return [
            Arm(size_name(*s), Pretrain("mlm_nsp", f"L{s[0]}-H{s[1]}-A{s[2]}", steps),
                ("mlm_ppl", "sst2", "mrpc"))
            for s in sizes
        ]  # fmt: skip
    if table == "fig5":
        points = sorted({max(1, steps * k // 4) for k in (1, 2, 3, 4)})
        out = [Arm("random init", Pretrain("mlm_nsp", model, 0), ("mrpc",))]
        for label, run in (("MLM", bert), ("LTR", ltr)):
            out += [Arm(f"{label}@{s}", run, ("mrpc",), step=s) for s in points]
        return out
    if table == "nsp_sop":
        return [
            Arm("none", Pretrain("mlm", model, steps), ("nsp", "sop")),
            Arm("NSP", bert, ("nsp", "sop")),
            Arm("SOP", Pretrain("mlm_sop", model, steps), ("nsp", "sop")),
        ]
    if table == "electra":  # ELECTRA Table 1: equal training FLOPs, the generator's counted
        return [
            Arm("BERT (MLM)", Pretrain("full_sentences", model, mlm_steps or steps), tasks),
            Arm("ELECTRA", Pretrain("electra", model, steps, "85/15/0"), tasks),
            Arm("random init", Pretrain("full_sentences", model, 0), tasks),
        ]
    raise ValueError(f"table {table!r}: use one of {', '.join(TABLES)}")
