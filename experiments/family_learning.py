"""Does each family's `cpu` recipe learn on the embedded corpus? RoBERTa (byte-level BPE, packed
full sentences, dynamic masking, Adam beta2 0.98) and ALBERT (factorised embeddings, every layer
shared, n-gram masks, sentence-order prediction, LAMB) are pretrained with their `cpu` presets
(bert_jax/configs/{roberta,albert}.py) and scored on held-out documents against the trivial
baselines: masked-LM accuracy against always predicting the most frequent training target and
against the context-free predictor (that target at [MASK], the shown token elsewhere; the same
masks), SOP accuracy against always answering the held-out majority order.

  python experiments/family_learning.py --workdir /tmp/family [--steps 3000] \
      [--families roberta,albert] [--corpus embedded|snapshot]

Writes WORKDIR/results.json. Held-out documents are every eighth document of the corpus slice.
`--corpus=snapshot` reads the fixed 2 MB text shipped with the package (bert_jax.corpus.snapshot,
what the test reads) instead of the embedded corpus of the installed versions.
The `cpu` presets' full 3000 steps take about 10 minutes per family on a 2-core CPU;
tests/test_family_learning.py runs the same code for 300 steps.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from typing import Any

import numpy as np

# family -> (create-pretraining-data objective, dynamic masking, vocab kind)
FAMILIES = {"roberta": ("full_sentences", True, "byte_bpe"), "albert": ("sop", False, "wordpiece")}


def prepare_data(root: pathlib.Path, family: str, corpus_bytes: int, vocab_size: int,
                 corpus: str = "embedded") -> dict:  # fmt: skip
    """Corpus slice -> train/held-out text -> the family's vocab -> train and eval shards.
    `corpus`: "embedded" (bert_jax.corpus.embedded) or "snapshot" (bert_jax.corpus.snapshot)."""
    import importlib

    from bert_jax.data.pipeline import create_pretraining_data
    from bert_jax.tokenization.byte_bpe_builder import build_byte_bpe
    from bert_jax.tokenization.vocab_builder import build_vocab

    objective, dynamic, kind = FAMILIES[family]
    source = importlib.import_module(f"bert_jax.corpus.{corpus}")
    docs = [d for d in source.iter_documents() if d]
    text: list[str] = []
    size = 0
    for doc in docs:
        if size >= corpus_bytes:
            break
        text.append("\n".join(doc))
        size += len(text[-1])
    held_out = text[::8]
    train = [d for i, d in enumerate(text) if i % 8]
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.txt").write_text("\n\n".join(train) + "\n", encoding="utf-8")
    (root / "eval.txt").write_text("\n\n".join(held_out) + "\n", encoding="utf-8")
    if kind == "byte_bpe":
        build_byte_bpe([str(root / "train.txt")], vocab_size, root / "vocab")
        vocab = root / "vocab" / "vocab.json"
    else:
        build_vocab(str(root / "train.txt"), vocab_size, root / "vocab", num_threads=1)
        vocab = root / "vocab" / "vocab.txt"
    data = {"vocab": str(vocab)}
    for split, dupes in (("train", 5), ("eval", 1)):
        create_pretraining_data(
            str(root / f"{split}.txt"), str(root / split), str(vocab), objective=objective,
            dynamic_masking=dynamic, max_seq_length=64, max_predictions_per_seq=10,
            dupe_factor=dupes, do_lower_case=kind == "wordpiece",
        )  # fmt: skip
        data[split] = str(root / split / "*.tfrecord")
    return data


def config_for(family: str, data: dict, steps: int, workdir: pathlib.Path) -> Any:
    from bert_jax.configs import albert, roberta
    from bert_jax.input.geometry import with_shard_geometry

    c = {"roberta": roberta, "albert": albert}[family].get_config("cpu")
    c.train_files, c.eval_files, c.vocab_file = data["train"], data["eval"], data["vocab"]
    c.train_steps = steps
    c.warmup_steps = min(c.warmup_steps, steps // 10)
    c.eval_every_steps = c.checkpoint_every_steps = steps
    c.max_eval_steps = 10**6  # every held-out example
    return with_shard_geometry(c)  # the `cpu` presets take the shards' max_seq_length etc.


def baselines(config: Any) -> dict[str, float]:
    """Held-out scores of the trivial predictors, on the masks the model is scored on."""
    from bert_jax.input import EvalInput
    from bert_jax.objectives.baselines import masked_lm_baselines
    from bert_jax.pretraining.task import bert_config_from, pretraining_task
    from bert_jax.tokenization.vocab import load_vocab

    task = pretraining_task(config, bert_config_from(config))

    def batches(files: str):
        return EvalInput(files, 64, config.max_seq_length, config.max_predictions_per_seq,
                         dynamic_masking=task.dynamic_masking, seed=config.seed,
                         objective=config.objective)  # fmt: skip

    spec = task.dynamic_masking  # static shards (ALBERT) carry WordPiece's [MASK]
    mask_id = spec.mask_id if spec is not None else load_vocab(config.vocab_file)["[MASK]"]
    mlm = masked_lm_baselines(batches(config.train_files), batches(config.eval_files), mask_id)
    out = {"unigram_mlm_accuracy": mlm["unigram"],
           "context_free_mlm_accuracy": mlm["unigram_or_copy"]}  # fmt: skip
    orders = [np.ravel(b["next_sentence_labels"])[b["example_mask"] > 0]
              for b in batches(config.eval_files) if "next_sentence_labels" in b]  # fmt: skip
    if orders:
        swapped = float(np.concatenate(orders).mean())
        out["majority_sop_accuracy"] = max(swapped, 1.0 - swapped)
    return out


def measure(family: str, root: pathlib.Path, steps: int, corpus_bytes: int,
            vocab_size: int, corpus: str = "embedded") -> dict[str, float]:  # fmt: skip
    from bert_jax.runs.pretrain import run_pretraining

    data = prepare_data(root / "data", family, corpus_bytes, vocab_size, corpus)
    config = config_for(family, data, steps, root / "workdir")
    result = run_pretraining(config, str(root / "workdir"))
    ev = result.last_eval
    out = {"steps": steps, "mlm_accuracy": ev["eval_masked_lm_accuracy"], **baselines(config)}
    if "eval_sentence_order_accuracy" in ev:
        out["sop_accuracy"] = ev["eval_sentence_order_accuracy"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--families", default="roberta,albert")
    parser.add_argument("--corpus_bytes", type=int, default=3_000_000)
    parser.add_argument("--vocab_size", type=int, default=4000)
    parser.add_argument("--corpus", choices=("embedded", "snapshot"), default="embedded")
    args = parser.parse_args()
    root = pathlib.Path(args.workdir)
    results = {}
    for family in args.families.split(","):
        results[family] = measure(family, root / family, args.steps, args.corpus_bytes,
                                  args.vocab_size, args.corpus)  # fmt: skip
        print(family, json.dumps(results[family]), flush=True)
    (root / "results.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
