"""Text-to-text fine-tuning of an encoder-decoder (T5, a seq2seq workdir of ours) on the GLUE and
SQuAD data the other tasks read, scored by decoding and the tasks' official metrics.

    GLUE   "sst2 sentence: it is good ."                          -> "positive"
           "mrpc sentence1: ... sentence2: ..."                    -> "equivalent"
           "stsb sentence1: ... sentence2: ..."                    -> "3.8" (label rounded to 0.2)
    SQuAD  "question: Who ... ? context: ..."                      -> the first gold answer
           (v2.0: an unanswerable question's target is empty, i.e. EOS only)

Field names and label words are T5's (its GLUE preprocessors; fields in the GLUE files' order).
Training is teacher-forced cross-entropy through the one loop (`Seq2SeqTask`); evaluation decodes
the dev inputs greedily (`bert_jax.decoding`). A generated string outside the label words counts
as wrong, as T5's metrics count it (binary tasks: flipped to the wrong label, so F1/MCC apply);
an STS-B string that is not a number scores -1. Outputs: `eval_results.json`,
`dev_predictions.jsonl` (input, output, target per example) and SQuAD's `predictions.json` (and
`null_odds.json` for v2.0: 1 for an empty answer, else 0).
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import numpy as np
from etils import epath

from bert_jax.arch.seq2seq import stack_seq2seq
from bert_jax.arch.seq2seq.decoding import GenerateSettings
from bert_jax.arch.seq2seq.generate_text import generate_lines
from bert_jax.arch.seq2seq.load import Seq2SeqPretrained, load_seq2seq, write_workdir_record
from bert_jax.arch.seq2seq.train_task import Seq2SeqTask
from bert_jax.atomic_write import write_text_atomic
from bert_jax.errors import BertJaxError
from bert_jax.input.seq2seq import Seq2SeqBatches
from bert_jax.tasks import glue, squad, squad_eval
from bert_jax.tasks.finetune_setup import output_dir, run_config, run_mesh, write_json
from bert_jax.tokenization.t5_vocab import T5Vocab
from bert_jax.train import loop

# T5's label words, in the order of each GlueSpec's labels.
LABEL_WORDS = {
    "cola": ("unacceptable", "acceptable"),
    "sst2": ("negative", "positive"),
    "mrpc": ("not_equivalent", "equivalent"),
    "qqp": ("not_duplicate", "duplicate"),
    "mnli": ("contradiction", "entailment", "neutral"),
    "qnli": ("entailment", "not_entailment"),
    "rte": ("entailment", "not_entailment"),
    "wnli": ("not_entailment", "entailment"),
}


# ---- examples as strings ------------------------------------------------------------------------
def glue_text(spec: glue.GlueSpec, ex: glue.Example) -> str:
    a_name, b_name = spec.tfds_text
    text = f"{spec.name} {a_name}: {ex.text_a}"
    return text if ex.text_b is None else f"{text} {b_name}: {ex.text_b}"


def glue_target(spec: glue.GlueSpec, label: str | float) -> str:
    if spec.is_regression:
        return f"{round(float(label) * 5) / 5:.1f}"
    return LABEL_WORDS[spec.name][spec.labels.index(label)]


def glue_prediction(spec: glue.GlueSpec, output: str) -> float:
    """A class index (-1: not a label word) or, for STS-B, a score (-1: not a number)."""
    if spec.is_regression:
        try:
            return float(output)
        except ValueError:
            return -1.0
    words = LABEL_WORDS[spec.name]
    return float(words.index(output.strip())) if output.strip() in words else -1.0


def squad_items(path: str) -> list[tuple[str, str, str, bool]]:
    """(id, input, target, is_impossible) per question of a SQuAD JSON file."""
    items = []
    for a, article in enumerate(squad.load_dataset(path)):
        for para in squad.paragraphs_of(article, f"{path}: data[{a}]"):
            for qa in para.get("qas", []):
                answers = squad.answers_of(qa, f"{path}: question {qa.get('id')}")
                impossible = bool(qa.get("is_impossible", False)) or not answers
                target = "" if impossible else str(answers[0].get("text", ""))
                text = f"question: {qa['question']} context: {para['context']}"
                items.append((str(qa["id"]), text, target, impossible))
    return items


def encode(vocab: T5Vocab, texts: list[str], length: int) -> np.ndarray:
    """[N, length] int32 ids, EOS-terminated (EOS replaces the last piece of a cut text)."""
    out = np.zeros((len(texts), length), np.int32)
    for i, text in enumerate(texts):
        ids = vocab.encode(text)
        if len(ids) > length:
            ids = [*ids[: length - 1], vocab.eos_id]
        out[i, : len(ids)] = ids
    return out


# ---- the job ------------------------------------------------------------------------------------
class _Data:
    def __init__(self, cfg) -> None:
        self.cfg = cfg
        if cfg.task_family == "glue":
            self.spec = glue.get_spec(cfg.task)
            if cfg.get("use_tfds", False):
                raise BertJaxError("text-to-text: use_tfds is not built; give data_dir")
            train = glue.read_split(self.spec, cfg.data_dir, "train")
            dev = glue.read_split(self.spec, cfg.data_dir, self.spec.dev_splits[0])
            self.train = ([glue_text(self.spec, e) for e in train],
                          [glue_target(self.spec, e.label) for e in train])  # fmt: skip
            self.dev_inputs = [glue_text(self.spec, e) for e in dev]
            self.dev_targets = [glue_target(self.spec, e.label) for e in dev]
            self.dev_labels = np.asarray([self._label(e.label) for e in dev])
        elif cfg.task_family == "squad":
            self.v2 = cfg.version == "v2.0"
            train = squad_items(os.path.join(cfg.data_dir, cfg.train_file))
            self.dev_path = os.path.join(cfg.data_dir, cfg.predict_file)
            dev = squad_items(self.dev_path)
            self.train = ([t for _, t, _, _ in train], [a for _, _, a, _ in train])
            self.dev_ids = [q for q, _, _, _ in dev]
            self.dev_inputs = [t for _, t, _, _ in dev]
            self.dev_targets = [a for _, _, a, _ in dev]
        else:
            raise BertJaxError(
                f"config task_family {cfg.task_family!r}: text-to-text fine-tuning is built for "
                "glue and squad (the checkpoint is an encoder-decoder)"
            )

    def _label(self, label: str | float) -> float:
        return float(label) if self.spec.is_regression else float(self.spec.labels.index(label))

    def score(self, outputs: list[str], out_dir: str) -> dict[str, float]:
        triples = zip(self.dev_inputs, outputs, self.dev_targets, strict=True)
        rows = [{"input": i, "output": o, "target": t} for i, o, t in triples]
        write_text_atomic(os.path.join(out_dir, "dev_predictions.jsonl"),
                          "".join(json.dumps(r) + "\n" for r in rows))  # fmt: skip
        if self.cfg.task_family == "glue":
            preds = np.asarray([glue_prediction(self.spec, o) for o in outputs])
            labels = self.dev_labels
            if not self.spec.is_regression:
                invalid = preds < 0
                if len(self.spec.labels) == 2:  # as T5: an invalid answer is the wrong label
                    preds[invalid] = 1 - labels[invalid]
                preds, labels = preds.astype(np.int64), labels.astype(np.int64)
            metrics = glue.compute_metrics(self.spec, preds, labels)
            metrics["valid_outputs"] = float(np.mean([glue_prediction(self.spec, o) >= 0
                                                      for o in outputs]))  # fmt: skip
            return metrics
        preds = dict(zip(self.dev_ids, outputs, strict=True))
        dataset = squad.load_dataset(self.dev_path)
        write_text_atomic(os.path.join(out_dir, "predictions.json"), json.dumps(preds, indent=2))
        if not self.v2:
            return squad_eval.evaluate_v1(dataset, preds)
        odds = {q: float(not o.strip()) for q, o in preds.items()}
        write_text_atomic(os.path.join(out_dir, "null_odds.json"), json.dumps(odds, indent=2))
        return squad_eval.evaluate_v2(dataset, preds, odds, 0.5)


def finetune(cfg, workdir: str | epath.Path) -> dict[str, float]:
    """One text-to-text run of `cfg` (a glue or squad fine-tuning config whose init_checkpoint
    is an encoder-decoder); `cfg.max_target_length` bounds targets and decoding."""
    if cfg.sweep or cfg.num_seeds > 1:
        raise BertJaxError("text-to-text fine-tuning: sweep and num_seeds > 1 are not built")
    if cfg.get("pack_examples", False):  # was silently ignored: the run equalled an unpacked one
        raise BertJaxError(
            "config pack_examples: not built for text-to-text fine-tuning of an encoder-decoder "
            "(its attention has no per-example masks to keep packed examples apart); drop "
            "--config.pack_examples"
        )
    pre: Seq2SeqPretrained = load_seq2seq(cfg.init_checkpoint)
    spm = cfg.vocab_file or pre.spm_model
    if not spm:
        raise BertJaxError(
            f"{cfg.init_checkpoint}: no spiece.model or tokenizer.json; set --config.vocab_file"
        )
    vocab = T5Vocab.for_model(spm, pre.config.vocab_size)
    data = _Data(cfg)
    targets_length = int(cfg.max_target_length)
    arrays = {"inputs": encode(vocab, data.train[0], cfg.max_seq_length),
              "targets": encode(vocab, data.train[1], targets_length)}  # fmt: skip
    run = run_config(cfg, len(arrays["inputs"]), cfg.learning_rate, cfg.num_train_epochs,
                     cfg.train_batch_size, cfg.seed)  # fmt: skip
    config = pre.config.replace(dtype=cfg.dtype)
    init = stack_seq2seq(pre.params) if config.scan_layers else pre.params  # loaded looped
    batch = run.train_batch_size
    task = Seq2SeqTask(config, batch, cfg.max_seq_length, targets_length,
                       train_data=Seq2SeqBatches(batch, run.seed, arrays=arrays))  # fmt: skip
    workdir = epath.Path(workdir)
    result = loop.train(run, task, str(workdir),
                        workdir_config=write_workdir_record(pre.config, str(spm)),
                        init_params=init, mesh=run_mesh(cfg))  # fmt: skip
    result.require_finished(workdir, run.train_steps)
    trained = dataclasses.replace(pre, config=config, params=jax.device_get(result.state.params))
    rows = generate_lines(trained, vocab, data.dev_inputs, GenerateSettings(targets_length),
                          cfg.eval_batch_size, cfg.max_seq_length)  # greedy, `generate`'s path
    outputs = [row["output"] for row in rows]
    with output_dir(workdir) as out_dir:  # process 0 writes; the others score the same outputs
        metrics = data.score(outputs, out_dir)
    metrics["train_steps"] = float(run.train_steps)
    write_json(metrics, workdir / "eval_results.json")
    return metrics
