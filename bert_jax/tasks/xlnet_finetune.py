"""Fine-tuning an XLNet through the existing tasks (GLUE, CoNLL NER, SQuAD).

`load` reads a Hugging Face XLNet directory (XLNetModel / XLNetLMHeadModel / a task class; config
.json + model.safetensors + spiece.model) into the encoder weights and XLNet's tokenizer;
`XLNetLayoutJob` wraps a task family's job so that its featurized rows reach the model in XLNet's
layout (`bert_jax.tasks.xlnet_layout`) and its outputs come back in the job's own, so reading,
metrics and prediction files are the job's. The training tasks build XLNet's heads from the
`XLNetConfig` (`bert_jax.tasks.train_tasks`). Multiple choice (SWAG), the "+ BiLSTM" head and
feature-based NER are BERT-only and refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from etils import epath

from bert_jax.errors import BertJaxError
from bert_jax.interop import hf
from bert_jax.interop.xlnet import read_xlnet_dir
from bert_jax.model.xlnet import XLNetConfig
from bert_jax.tasks import xlnet_layout
from bert_jax.tasks.jobs import GlueJob, Split, SwagJob
from bert_jax.tokenization.directory import (
    check_vocab_fits,
    open_xlnet_tokenizer,
    tokenizer_file_in,
)


@dataclasses.dataclass(frozen=True)
class XLNetPretrained:
    """What the runner needs of a checkpoint, as `bert_jax.interop.Pretrained` for BERT."""

    config: XLNetConfig
    params: dict  # {"transformer": encoder}
    source: str
    vocab_file: epath.Path | None = None  # spiece.model or tokenizer.json, kept in the workdir

    def workdir_config(self) -> dict[str, Any]:
        return {"xlnet": self.config.to_hf()}


def load(cfg) -> tuple[Any, XLNetPretrained, bool]:
    """(tokenizer, weights, do_lower_case) of `cfg.init_checkpoint`, an XLNet directory."""
    path = epath.Path(cfg.init_checkpoint)
    if cfg.get("feature_based", False) or cfg.get("bilstm_size", 0):
        what = "feature_based" if cfg.get("feature_based", False) else "bilstm_size"
        raise BertJaxError(f"config {what}: not built for XLNet ({path} is an XLNet directory)")
    spiece = epath.Path(cfg.vocab_file) if cfg.vocab_file else tokenizer_file_in(path)
    if spiece is None or not spiece.exists():
        raise BertJaxError(
            f"{spiece or path / 'spiece.model'}: no such file (XLNet's sentencepiece model or "
            "tokenizer.json; set vocab_file)"
        )
    config, params, _ = read_xlnet_dir(path)
    # XLNet's releases are cased: unset means the directory's setting, else cased.
    tokenizer = open_xlnet_tokenizer(spiece, cfg.do_lower_case, hf.guess_do_lower_case(path))
    check_vocab_fits(tokenizer, config.vocab_size, path)
    pre = XLNetPretrained(config, {"transformer": params["transformer"]}, str(path), spiece)
    return tokenizer, pre, tokenizer.do_lower_case


class XLNetLayoutJob:
    """A task family's job (`bert_jax.tasks.jobs`) whose arrays are in XLNet's layout."""

    def __init__(self, job: Any):
        if isinstance(job, SwagJob):
            raise BertJaxError("multiple choice (SWAG): not built for XLNet")
        self.job = job
        self._per_token = not isinstance(job, GlueJob)  # tagging and span logits

    def __getattr__(self, name: str) -> Any:  # num_train_examples, stats, headline, ...
        return getattr(self.job, name)

    def load(self, tokenizer: Any) -> None:
        self.job.load(tokenizer)
        self.train, _ = xlnet_layout.relayout(self.job.train)
        self.evals = [self._moved(s) for s in self.job.evals]
        self.tests = [self._moved(s) for s in self.job.tests]

    @staticmethod
    def _moved(split: Split) -> Split:
        arrays, pos_NxL = xlnet_layout.relayout(split.arrays)
        return Split(split.name, arrays, (split, pos_NxL))

    def train_task(self, config: XLNetConfig, batch: int):
        return self.job.train_task(config, batch)

    def _back(self, split: Split, outputs: Any) -> tuple[Split, Any]:
        original, pos_NxL = split.meta
        if self._per_token:
            outputs = xlnet_layout.back_to_featurizer_layout(outputs, pos_NxL)
        return original, outputs

    def score(self, split: Split, outputs: Any, workdir: str) -> dict[str, float]:
        return self.job.score(*self._back(split, outputs), workdir)

    def write_test(self, split: Split, outputs: Any, workdir: str) -> None:
        self.job.write_test(*self._back(split, outputs), workdir)
