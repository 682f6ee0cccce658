"""The ablation harness: the causal switch against transformers, the LTR objective, masking
mixes in static shards, the offline downstream suite, ELECTRA's matched FLOPs and the workdir's
settings check (the `--quick` runs of every table: tests/test_ablate_quick_run.py)."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import numpy as np
import pytest

from bert_jax.ablations import suite, tables
from bert_jax.config import preset
from bert_jax.errors import BertJaxError


def test_causal_encoder_matches_transformers_decoder(tmp_path):
    import torch
    import transformers

    from bert_jax.arch.bert import hf
    from bert_jax.arch.bert.model import BertModel

    cfg = transformers.BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, is_decoder=True,
    )  # fmt: skip
    torch.manual_seed(0)
    theirs = transformers.BertModel(cfg).eval()
    theirs.save_pretrained(tmp_path)
    config, params, _, _ = hf.read_hf_dir(tmp_path, None)
    assert config.causal  # is_decoder=True reads as a causal encoder
    ids = np.random.RandomState(0).randint(1, 99, (2, 9))
    mask = np.ones((2, 9), np.int64)
    mask[1, 6:] = 0
    with torch.no_grad():
        ref = theirs(torch.tensor(ids), attention_mask=torch.tensor(mask)).last_hidden_state
    real = mask.astype(bool)
    for explicit in (False, True):  # fused attention, and the path that returns probabilities
        out = BertModel(config.replace(causal=True)).apply(
            {"params": params["bert"]}, ids, mask, output_attentions=explicit
        )
        np.testing.assert_allclose(np.asarray(out.sequence_output)[real], ref.numpy()[real],
                                   atol=1e-5)  # fmt: skip
    bidirectional = BertModel(config.replace(causal=False)).apply(
        {"params": params["bert"]}, ids, mask
    )
    assert np.abs(np.asarray(bidirectional.sequence_output)[real] - ref.numpy()[real]).max() > 1e-2


def test_ltr_objective_needs_a_causal_model():
    from bert_jax.pretraining.task import PretrainingTask

    with pytest.raises(BertJaxError, match="causal"):
        PretrainingTask(preset("tiny", vocab_size=50), 2, 16, 4, objective="ltr")
    PretrainingTask(preset("tiny", vocab_size=50, causal=True), 2, 16, 4, objective="ltr")


def test_masking_mix_reaches_static_shards(tmp_path, uncased_vocab):
    from bert_jax.data.pipeline import create_pretraining_data
    from bert_jax.shards.example import decode
    from bert_jax.shards.tfrecord import read_records
    from bert_jax.tokenization.vocab import load_vocab

    mask_id = load_vocab(str(uncased_vocab))["[MASK]"]
    kept = {}
    for mix in ((1.0, 0.0), (0.0, 0.0)):
        out = tmp_path / str(mix)
        stats = create_pretraining_data(
            "embedded:20", str(out), str(uncased_vocab), max_seq_length=48,
            max_predictions_per_seq=8, dupe_factor=1, mask_prob=mix[0], random_prob=mix[1],
        )  # fmt: skip
        assert stats["settings"]["mask_prob"] == mix[0]
        at_mask = []
        for record in read_records(str(next(out.glob("*.tfrecord")))):
            f = decode(record)
            n = int(f["masked_lm_weights"].sum())
            picked = f["input_ids"][f["masked_lm_positions"][:n]]
            at_mask.append(picked == mask_id)
            if mix == (0.0, 0.0):  # 0/100/0: selected tokens keep their id
                assert (picked == f["masked_lm_ids"][:n]).all()
        kept[mix] = np.concatenate(at_mask).mean()
    assert kept[1.0, 0.0] == 1.0 and kept[0.0, 0.0] == 0.0
    with pytest.raises(BertJaxError, match="mask_prob"):
        create_pretraining_data("embedded:5", str(tmp_path / "bad"), str(uncased_vocab),
                                mask_prob=0.9, random_prob=0.2)  # fmt: skip


def test_suite_is_deterministic_and_readable_by_the_task_readers(tmp_path, uncased_vocab):
    from bert_jax.corpus import embedded
    from bert_jax.tasks import glue, ner, squad

    docs = list(embedded.iter_documents(max_documents=400, packages=()))[::4]
    counts = suite.build_suite(docs, str(tmp_path / "a"), 120, 60)
    suite._MADE.clear()  # built again from the documents, not from this process's last build
    suite.build_suite(docs, str(tmp_path / "b"), 120, 60)
    assert suite.build_suite(docs, str(tmp_path / "c"), 120, 60) == counts  # from the last one
    suite.build_suite(docs, str(tmp_path / "seed1"), 120, 60, seed=1)
    for a in sorted((tmp_path / "a").rglob("*.*")):
        for again in ("b", "c"):
            assert a.read_bytes() == (tmp_path / again / a.relative_to(tmp_path / "a")).read_bytes()
    dev = "sst2/dev.tsv"
    assert (tmp_path / "a" / dev).read_text() != (tmp_path / "seed1" / dev).read_text()
    assert all(c["train"] > 50 and c["dev"] > 20 for c in counts.values()), counts
    doc_of = {" ".join(s.split()): d for d, doc in enumerate(docs) for s in doc}
    index_of = {" ".join(s.split()): i for doc in docs for i, s in enumerate(doc)}
    by_length: dict[int, list[list[str]]] = {}
    for sentence in doc_of:
        by_length.setdefault(len(sentence.split()), []).append(sentence.split())

    def originals_of(words: list[str], keep: list[bool]) -> list[list[str]]:
        """The corpus sentences that agree with `words` wherever `keep` says."""
        found = [o for o in by_length[len(words)]
                 if all(a == b for a, b, k in zip(o, words, keep, strict=True) if k)]  # fmt: skip
        assert found, words
        return found

    def look(word: str) -> tuple[bool, str]:  # capitalised?, trailing punctuation
        return word[:1].isupper(), word[len(word.rstrip(".,;:")) :]

    # Word meaning: a swapped sentence differs from its original in one word, which keeps the
    # original's ending, capitalisation and punctuation.
    rows = glue.read_split(glue.get_spec("sst2"), str(tmp_path / "a" / "sst2"), "train")
    assert 0.35 < np.mean([r.label == "1" for r in rows]) < 0.65
    for r in rows:
        words = r.text_a.split()
        if r.label == "1":
            assert r.text_a in doc_of
            continue
        assert r.text_a not in doc_of

        def one_swap(original: list[str], words: list[str] = words) -> bool:
            (i,) = [i for i, (a, b) in enumerate(zip(original, words, strict=True)) if a != b]
            old, new = original[i], words[i]
            return look(old) == look(new) and old[-2:].lower() == new[-2:].lower()

        near = [o for o in by_length[len(words)]
                if sum(a != b for a, b in zip(o, words, strict=True)) == 1]  # fmt: skip
        assert any(one_swap(o) for o in near), r.text_a
    # Pairs share a content word; same document (never adjacent) or two documents.
    rows = glue.read_split(glue.get_spec("mrpc"), str(tmp_path / "a" / "mrpc"), "train")
    assert 0.35 < np.mean([r.label == "1" for r in rows]) < 0.65
    for r in rows:
        a, b = r.text_a, r.text_b
        assert {suite._word_key(w) for w in a.split()} & {suite._word_key(w) for w in b.split()}
        assert (doc_of[a] == doc_of[b]) == (r.label == "1")
        if r.label == "1":
            assert abs(index_of[a] - index_of[b]) >= 2
    # Replaced words look like the words they replace.
    sentences = ner.read_conll(str(tmp_path / "a" / "conll" / "train.txt"))
    tagged = sum(t == "B-MISC" for s in sentences for t in s.tags)
    assert 0.5 * len(sentences) < tagged < 1.5 * len(sentences)
    for s in sentences:
        assert any(
            all(t == "O" or (look(a) == look(b) and a != b)
                for a, b, t in zip(o, s.words, s.tags, strict=True))
            for o in originals_of(s.words, [t == "O" for t in s.tags])
        ), s.words  # fmt: skip
    # The cloze: every answer stands before the blanked sentence that ends the context.
    data = squad.load_dataset(str(tmp_path / "a" / "squad" / "dev-v1.1.json"))
    sentences_lower = {s.lower() for s in doc_of}
    for article in data:
        for p in article["paragraphs"]:
            (qa,) = p["qas"]
            assert qa["question"] == suite.QUESTION
            texts = {a["text"].lower() for a in qa["answers"]}
            blank = p["context"].rindex(" _")
            assert len(texts) == 1 and p["context"].count("_") == 1
            for ans in qa["answers"]:
                start = ans["answer_start"]
                assert p["context"][start : start + len(ans["text"])] == ans["text"]
                assert start + len(ans["text"]) < blank
            filled = (p["context"][: blank + 1] + texts.pop() + p["context"][blank + 2 :]).lower()
            assert any(filled.endswith(s) for s in sentences_lower), filled
    # Each task's fine-tuning length: the shortest that cuts none of its examples.
    _check_fine_tuning_lengths(tmp_path / "a", uncased_vocab)


def _check_fine_tuning_lengths(suite_dir: pathlib.Path, uncased_vocab: pathlib.Path) -> None:
    """The length (a multiple of 32) keeps every train and dev example whole, as the task's
    own featurizer packs it, and 32 fewer would cut the longest one."""
    from bert_jax.ablations.task_length import ROUND_TO, fine_tuning_length, released_length
    from bert_jax.tasks import glue, ner
    from bert_jax.tokenization import FullTokenizer

    tokenizer = FullTokenizer(str(uncased_vocab), do_lower_case=True)
    for kind in ("sst2", "mrpc", "conll"):
        where = str(suite_dir / kind)
        length = fine_tuning_length(kind, where, str(uncased_vocab), cap=512)
        if kind == "conll":
            sentences = [s for name in ("train.txt", "valid.txt")
                         for s in ner.read_conll(f"{where}/{name}")]  # fmt: skip
            arrays, windows = ner.featurize(sentences, tokenizer, length)
            assert len(windows) == len(sentences), kind  # none split across windows
        else:
            spec = glue.get_spec(kind)
            examples = [e for split in ("train", *spec.dev_splits)
                        for e in glue.read_split(spec, where, split)]  # fmt: skip
            arrays = glue.featurize(spec, examples, tokenizer, length)
            whole = glue.featurize(spec, examples, tokenizer, 512)["input_mask"].sum(1)
            assert (arrays["input_mask"].sum(1) == whole).all(), kind
        longest = int(arrays["input_mask"].sum(1).max())
        assert length % ROUND_TO == 0 and length - ROUND_TO < longest <= length, (kind, longest)
        # A released checkpoint counts in its own vocab.txt (this one is MiniLM's, uncased by
        # its tokenizer_config.json); a directory without one keeps the cap.
        assert released_length(kind, where, uncased_vocab.parent, cap=512) == length, kind
        assert released_length(kind, where, suite_dir, cap=512) == 512, kind
    assert fine_tuning_length("squad", "unused", str(uncased_vocab), cap=96) == 96


def test_electra_table_matches_training_flops_and_reads_packed_shards():
    """The MLM arm gets the steps whose FLOPs equal the ELECTRA arm's (generator counted, from
    the trainer's own FLOPs count of each task); both read full-sentence shards."""
    from bert_jax.ablations.scales import SCALES, mlm_steps_at_electra_flops
    from bert_jax.ablations.workdir import shard_objective
    from bert_jax.pretraining.task import pretraining_task
    from bert_jax.train.config import pretrain_config

    s = SCALES["cpu"]
    mlm_steps = mlm_steps_at_electra_flops(s, s.steps)
    bert, electra, random = tables.get("electra").arms(s)
    assert (bert.pretrain.objective, electra.pretrain.objective) == ("full_sentences", "electra")
    assert electra.pretrain.family == "electra" and bert.pretrain.family == "bert"
    assert electra.pretrain.mask_and_random_prob == (0.85, 0.0) and not random.pretrain.steps
    per_step = {}
    for objective, family in (("full_sentences", "bert"), ("electra", "electra")):
        c = pretrain_config(s.model)
        c.update(objective=objective, family=family, vocab_size=s.vocab_size,
                 max_seq_length=s.seq, max_predictions_per_seq=s.predictions)  # fmt: skip
        config = preset(s.model, vocab_size=s.vocab_size, family=family)
        per_step[objective] = pretraining_task(c, config).flops_per_step(s.batch)
    electra_flops = s.steps * per_step["electra"]
    assert mlm_steps > s.steps
    assert abs(mlm_steps * per_step["full_sentences"] - electra_flops) < per_step["full_sentences"]
    assert {shard_objective(o) for o in ("full_sentences", "electra")} == {"full_sentences"}
    assert (shard_objective("mlm_nsp"), shard_objective("mlm_sop")) == ("nsp", "sop")


def test_a_workdir_made_at_other_settings_is_refused(tmp_path):
    """Runs are keyed by objective, model, steps, mix, task, fine-tuning budget and seed; a rerun
    whose other settings differ (here the pretraining learning rate, and the --task data) must not
    mix its numbers with the old ones, nor one made with another construction of the built-in
    suite. The keyed ones may differ."""
    from bert_jax.ablations.harness import Harness
    from bert_jax.ablations.run import scale_for

    scale = scale_for("cpu", quick=True)
    Harness(str(tmp_path), scale)
    smaller = scale_for("cpu", quick=True, steps=32, seeds=3, model="L2-H64-A2", sizes="L1-H32-A2")
    assert smaller.sizes == ((1, 32, 2),) and smaller.steps == 32
    Harness(str(tmp_path), smaller)
    Harness(str(tmp_path), dataclasses.replace(scale, finetune_epochs=9, finetune_lr=1e-5))
    settings = json.loads((tmp_path / "settings.json").read_text())
    assert settings["learning_rate"] == scale.learning_rate and "finetune_lr" not in settings
    with pytest.raises(BertJaxError, match=r"settings.json: .*learning_rate=0.001 \(now 0.0005\)"):
        Harness(str(tmp_path), dataclasses.replace(scale, learning_rate=5e-4))
    sst2 = str(pathlib.Path(__file__).parent / "fixtures/reference_tasks/glue/sst2")  # a real one
    with pytest.raises(BertJaxError, match=r"tasks=\{\} \(now \{'sst2': '.*sst2'\}\)"):
        Harness(str(tmp_path), scale, tasks={"sst2": sst2})
    settings.pop("suite_version")  # a workdir from before the suite's version was recorded
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    with pytest.raises(BertJaxError, match=rf"suite_version=None \(now {suite.VERSION}\)"):
        Harness(str(tmp_path), scale)
    with pytest.raises(BertJaxError, match=r"--finetune_lr=-0.001: must be positive"):
        scale_for("cpu", finetune_lr=-1e-3)
    with pytest.raises(BertJaxError, match=r"--sizes: 'L4-H192-A5' is not L<layers>-H<hidden>"):
        scale_for("cpu", sizes="L1-H128-A2,L4-H192-A5")


def test_units_parse_with_commas_in_arm_names():
    """`--units` items end at their ":SEED", so Table 6's arm names (which hold commas) and
    the plan's own "run them" line parse back; an item without a seed is refused by name."""
    from bert_jax.ablations.unit_jobs import parse_units

    assert parse_units("No NSP:2, LTR & No NSP:2,MLM@2500:1") == (
        ("No NSP", 2), ("LTR & No NSP", 2), ("MLM@2500", 1))  # fmt: skip
    assert parse_units("L=1,H=128,A=2:0,L=4,H=128,A=2:1") == (
        ("L=1,H=128,A=2", 0), ("L=4,H=128,A=2", 1))  # fmt: skip
    for bad in ("No NSP", "No NSP:x", ":1", "L=1,H=128,A=2:0,L=4"):
        with pytest.raises(BertJaxError, match="is not ARM:SEED"):
            parse_units(bad)
