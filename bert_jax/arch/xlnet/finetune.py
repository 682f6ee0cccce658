"""Fine-tuning an XLNet through the existing tasks (GLUE, CoNLL NER, SQuAD).

The XLNet family (`bert_jax.arch.xlnet.family`) loads a Hugging Face XLNet directory and builds
XLNet's heads; `XLNetLayoutJob` here wraps a task family's job so that its featurized rows reach
the model in XLNet's layout (`bert_jax.arch.xlnet.layout`) and its outputs come back in the
job's own, so reading, metrics and prediction files are the job's. Multiple choice (SWAG), the
"+ BiLSTM" head and feature-based NER are BERT-only and refused.
"""

from __future__ import annotations

from typing import Any

from bert_jax.arch.xlnet import XLNetConfig
from bert_jax.arch.xlnet import layout as xlnet_layout
from bert_jax.errors import BertJaxError
from bert_jax.tasks.jobs import GlueJob, Split, SwagJob


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
