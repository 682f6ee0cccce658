"""`--quick` runs of every table but 8: every arm end to end on one workdir, resumable, with its
shared runs trained once, its estimate of what is left, its put-off jobs, some columns only
(`--only_tasks`), its intervals again from the saved rows (`--rerender`), and the same table
assembled elsewhere from the units it kept (`--units_dir`, `--units`, `--plan`)."""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib

import numpy as np
import pytest

from bert_jax.ablations import tables
from bert_jax.ablations.tables import table8
from bert_jax.errors import BertJaxError


@pytest.mark.slow  # tables 5, fig5, 6 and nsp_sop end to end: about 3 min on 2 idle cores
def test_quick_run_of_every_table_is_complete_and_resumable(tmp_path, monkeypatch):
    """Every table but 8 (six more pretraining runs, its arms differ from Table 5's No NSP only
    in the masking mix, checked in static shards above): kept out to hold the suite's time; its
    arms are checked to be Table 5's No NSP run under the paper's six mixes. Table 6 runs while
    its new pretraining run is held by another run's workdir lock, as a second sweep would."""
    from bert_jax.ablations import report, run
    from bert_jax.ablations.run import ablate, scale_for
    from bert_jax.train.lock import WorkdirLock

    scale = scale_for("cpu", quick=True)
    mixes = {a.pretrain.mask_and_random_prob for a in table8.arms(scale) if a.pretrain.steps}
    no_nsp = tables.get("5").arms(scale)[1].pretrain
    assert table8.arms(scale)[0].pretrain == no_nsp  # 80/10/10: one run, trained once
    # the paper writes MASK/SAME/RND: 80/0/20 replaces a fifth at random, 0/0/100 all of them
    assert mixes == {(0.8, 0.1), (1.0, 0.0), (0.8, 0.2), (0.8, 0.0), (0.0, 0.8), (0.0, 1.0)}
    messages: list[str] = []
    docs = {}
    held: list[WorkdirLock] = []

    def progress(message: str) -> None:  # the holder finishes once the sweep has put it off
        messages.append(message)
        if message.startswith("  put off:"):
            held.pop().release()

    monkeypatch.setattr(run, "RETRY_SECONDS", 0.0)
    # Every run's workdir stays held after its training, until its results are written (a run's
    # last act is drawing its curves): a second sweep never takes a finished run for unfinished.
    import bert_jax.runs.finetune
    import bert_jax.train.curves

    holders: list[str | None] = []

    def curves_while_held(workdir, *args, draw=bert_jax.train.curves.write_curves, **kw):
        holders.append(WorkdirLock(workdir).holder())
        return draw(workdir, *args, **kw)

    monkeypatch.setattr(bert_jax.train.curves, "write_curves", curves_while_held)
    monkeypatch.setattr(bert_jax.runs.finetune, "write_curves", curves_while_held)
    for table in ("5", "fig5", "6", "nsp_sop"):
        if table == "6":
            new = [a for a in tables.get("6").arms(scale)
                   if not (tmp_path / "pretrain" / a.pretrain.key).exists()]  # fmt: skip
            held.append(WorkdirLock(tmp_path / "pretrain" / new[0].pretrain.key).acquire())
            messages.clear()
        docs[table] = ablate(table, scale, str(tmp_path), progress=progress,
                             units_dir=str(tmp_path / "units"))  # fmt: skip
        todo = [m for m in messages if m.startswith("to do:")]  # a fresh workdir says nothing
        if table == "fig5":  # 3 quarters x 2 objectives left; kinds timed in Table 5's runs
            assert len(todo) == 1 and todo[0].startswith("to do: 6 fine-tuning runs (about ")
        if table == "6":  # its new size has no finished run of its kind to go by
            assert "1 pretraining run (none of their kind finished yet)" in todo[0], todo
        if table == "6":  # its first job is put off, every other job runs, then it comes back
            assert not held
            put_off = [m for m in messages if m.startswith("  put off:")]
            assert len(put_off) == 1 and new[0].pretrain.key in put_off[0], put_off
            jobs = [m for m in messages if m.startswith("[")]
            assert jobs[0].startswith("[1/") and jobs[-1].split(" (")[0] == jobs[0].split(" (")[0]
            assert len(jobs) == int(jobs[0][3:].split("]")[0]) + 1, jobs
        expected = [a.name for a in tables.get(table).arms(scale)]
        assert list(docs[table]["arms"]) == list(dict.fromkeys(expected))
        on_disk = json.loads((tmp_path / f"{table}.json").read_text())
        assert on_disk == json.loads(json.dumps(report.json_safe(docs[table])))
        assert (tmp_path / f"{table}.md").read_text().count("\n|") >= len(expected)
    assert len(holders) > 20 and None not in holders, holders
    assert docs["5"]["arms"]["LTR & No NSP"]["squad"]["paper"] == 77.8
    # masked-LM arms are read against the context-free predictor on the same held-out masks
    checks = docs["5"]["pretraining"]
    assert set(checks) == {"BERT", "No NSP", "LTR & No NSP", "+ BiLSTM"}, checks  # not random
    for arm in ("BERT", "No NSP"):
        check = checks[arm]
        assert 0 < check["unigram"] < check["context_free"] < 0.5 and check["mlm_accuracy"] >= 0
    ltr = checks["LTR & No NSP"]  # its bar: the next-token unigram rate
    assert set(ltr) == {"lm_accuracy", "unigram"} and 0 < ltr["unigram"] < 0.5
    md5 = (tmp_path / "5.md").read_text()
    assert "| BERT | " in md5.split("context-free predictor")[1]
    assert "| LTR & No NSP | " in md5.split("Left-to-right LMs")[1]
    assert set(docs["5"]["arms"]["+ BiLSTM"]) == {"sst2", "mrpc", "conll", "squad"}
    for config in (tmp_path / "finetune").glob("ltr-*/*+bilstm*/e*/seed0/config.json"):
        # the new LSTMs at their own rate, the encoder at the arm's
        assert json.loads(config.read_text())["head_learning_rate"] == 1e-3
    assert len(list((tmp_path / "finetune").glob("ltr-*/*+bilstm*/e*/seed0"))) == 4
    for row in docs["6"]["arms"].values():
        assert 1.0 < row["mlm_ppl"]["median"] < 2 * scale.vocab_size
    # Table 6's arms compared sequence by sequence: each run's held-out loss rows give its own
    # evaluation's loss, and the interval's difference is that of the log perplexities.
    (pair, d), = docs["6"]["intervals"]["mlm_ppl"].items()
    a, b = (docs["6"]["arms"][arm]["mlm_ppl"]["median"] for arm in pair.split(" - "))
    assert d["diff"] == pytest.approx(math.log(a) - math.log(b), rel=1e-4)
    for rows in (tmp_path / "pretrain").glob("mlm-*/mlm_loss_rows.npz"):
        loss = np.load(rows)["rows"].sum(0)
        done = json.loads((rows.parent / "done.json").read_text())
        assert loss[0] / loss[1] == pytest.approx(done["eval_masked_lm_loss"], rel=1e-5)
    assert docs["nsp_sop"]["finetune"] is None and docs["6"]["finetune"]["epochs"] == 1
    for name, row in docs["nsp_sop"]["arms"].items():
        assert set(row) == {"nsp", "sop"}, name
    # Every arm's pair head is scored on the same held-out pairs, so its claims get intervals.
    for task in ("nsp", "sop"):
        kept = {f.parent.name.split("-")[0]: json.loads(f.read_text())
                for f in (tmp_path / "pretrain").glob(f"*/pair_rows_{task}.json")}  # fmt: skip
        assert set(kept) == {"mlm", "mlm_nsp", "mlm_sop"}, kept.keys()
        labels = kept["mlm"]["labels"]
        assert labels and all(k["labels"] == labels for k in kept.values()), task
        pairs = {"none - NSP", "none - SOP", "NSP - SOP"}  # and each against the constant
        pairs |= {f"{arm} - best constant" for arm in ("none", "NSP", "SOP")}
        assert set(docs["nsp_sop"]["intervals"][task]) == pairs
        ones = 100 * sum(labels) / len(labels)  # the best constant answer on these pairs
        assert docs["nsp_sop"]["baselines"][task]["best_constant"] == max(ones, 100 - ones)
        correct = kept["mlm_nsp"]["correct"]
        assert set(correct) <= {0, 1} and docs["nsp_sop"]["arms"]["NSP"][task][
            "median"] == pytest.approx(100 * sum(correct) / len(correct))
    assert (tmp_path / "fig5.png").stat().st_size > 1000
    # Figure 5's last point is the end of Table 5's No NSP and LTR runs: their fine-tuning, reused
    assert not list((tmp_path / "finetune").glob(f"*@{scale.steps}"))
    last = docs["fig5"]["arms"][f"MLM@{scale.steps}"]["conll"]
    assert last == docs["5"]["arms"]["No NSP"]["conll"], last
    assert (tmp_path / "6.png").stat().st_size > 1000
    # Shared runs are trained once: Table 5's No NSP is Figure 5's MLM and Table 6's L1-H64-A2.
    runs = sorted(p.name for p in (tmp_path / "pretrain").iterdir())
    assert len(runs) == 4 + 1 + 1  # 5: 3 + random; 6: one more size; SOP
    # Each run's time is recorded and summed once per table (the rerun below reads it back).
    spent = docs["5"]["compute"]
    assert spent["runs"] == 4 + 5 * 4 and spent["untimed_runs"] == 0, spent  # 4 pretraining
    assert spent["pretraining_h"] > 0 and spent["finetuning_h"] > 0 and spent["choosing_h"] == 0
    assert f"Run time, summed over its {spent['runs']} runs (one process each)" in md5
    # Rerun: nothing is retrained or re-fine-tuned, and the table is the same.
    finished = {p: p.stat().st_mtime for p in pathlib.Path(tmp_path).rglob("eval_results.json")}
    messages.clear()
    again = ablate("5", scale, str(tmp_path), progress=messages.append)
    assert again == docs["5"]
    assert not any(m.startswith(("pretraining", "to do:")) for m in messages)
    assert {p: p.stat().st_mtime for p in finished} == finished
    # Its per-example rows, saved beside it, give the same intervals without the workdir; the
    # intervals are computed from them (BERT's mrpc answers flipped: accuracy 100 - A).
    from bert_jax.ablations.evidence import Evidence

    moved = tmp_path / "results"
    moved.mkdir()
    for name in ("5.json", "5.rows.npz"):
        (moved / name).write_bytes((tmp_path / name).read_bytes())
    assert report.rerender(str(moved / "5.json")) == docs["5"]
    evidence = Evidence.load(moved / "5.rows.npz")
    evidence.examples["BERT"]["mrpc"] = [1 - r for r in evidence.examples["BERT"]["mrpc"]]
    evidence.save(moved / "5.rows.npz")
    a, b = (docs["5"]["arms"][arm]["mrpc"]["median"] for arm in ("BERT", "No NSP"))
    flipped = report.rerender(str(moved / "5.json"))["intervals"]["mrpc"]["BERT - No NSP"]
    assert flipped["diff"] == pytest.approx(100 - a - b)
    assert (moved / "5.md").exists()
    # Another fine-tuning budget reuses every pretraining run and fine-tunes anew beside the old.
    # Another fine-tuning budget: new fine-tuning directories over the same pretraining runs.
    from bert_jax.ablations.harness import Harness

    arm = tables.get("5").arms(scale)[0]
    longer = Harness(str(tmp_path), dataclasses.replace(scale, finetune_epochs=2), progress=print)
    assert longer._finetune_dir(arm, "mrpc", 0) != Harness(
        str(tmp_path), scale, progress=print
    )._finetune_dir(arm, "mrpc", 0)
    assert longer.pretrain(arm.pretrain) == tmp_path / "pretrain" / arm.pretrain.key  # kept
    # A task's own epochs name only that task's runs; each run is at its task's length.
    same = Harness(str(tmp_path), scale, progress=print)
    conll_only = Harness(str(tmp_path), dataclasses.replace(scale, task_epochs=(("conll", 2.0),)),
                         progress=print)  # fmt: skip
    assert conll_only._finetune_dir(arm, "mrpc", 0) == same._finetune_dir(arm, "mrpc", 0)
    assert conll_only._finetune_dir(arm, "conll", 0) != same._finetune_dir(arm, "conll", 0)
    for task in ("sst2", "conll", "squad"):
        config = json.loads((same._finetune_dir(arm, task, 0) / "config.json").read_text())
        assert config["max_seq_length"] == same.finetune_seq(arm, task) <= scale.seq, task
    # A run's held-out evaluation at each checkpoint it kept; the last one is its done.json's.
    from bert_jax.ablations.checks import along_training

    seen = along_training(same, arm.pretrain, lambda task, trainer, params: {"extra": 1.0})
    assert sorted(seen) == [scale.steps // 4 * k for k in (1, 2, 3, 4)]
    final = json.loads((same.pretrain(arm.pretrain) / "done.json").read_text())
    for key, value in seen[scale.steps].items():
        if key.startswith("eval_"):
            assert value == pytest.approx(final[key], rel=1e-5), key
    assert seen[scale.steps]["extra"] == 1.0 and seen[scale.steps // 4]["eval_loss"] > 0
    no_nsp = tables.get("5").arms(scale)[1].pretrain  # a table's check reads the last only
    (last,) = along_training(same, no_nsp, last_only=True).items()
    final = json.loads((same.pretrain(no_nsp) / "done.json").read_text())
    assert last[0] == scale.steps and last[1]["eval_loss"] == pytest.approx(final["eval_loss"])
    # A budget that would read the text too often is refused before it trains (--scale host).
    strict = Harness(str(tmp_path), dataclasses.replace(scale, max_repetition=2.0),
                     progress=print)  # fmt: skip
    long_run = dataclasses.replace(arm.pretrain, steps=400)
    assert strict.repetition(long_run) == pytest.approx(25 * strict.repetition(arm.pretrain))
    with pytest.raises(BertJaxError, match=r"400 steps would read the pretraining text \S+ "
                                           r"times \(the quick scale allows 2\)"):  # fmt: skip
        strict.pretrain(long_run)
    # Per-example intervals of every pair of arms, and the best constant of each dev split.
    mrpc = docs["5"]["intervals"]["mrpc"]
    assert set(mrpc) >= {"BERT - No NSP", "No NSP - LTR & No NSP", "BERT - random init"}
    for d in mrpc.values():
        assert d["low"] <= d["diff"] <= d["high"] and d["runs"] == [1, 1]
    for kind, base in docs["5"]["baselines"].items():
        assert base["majority"] <= base["best_constant"] + 1e-9, kind
        for arm, row in docs["5"]["arms"].items():  # the constant scored as a run: same score
            d = docs["5"]["intervals"][kind][f"{arm} - best constant"]
            assert d["diff"] == pytest.approx(row[kind]["median"] - base["best_constant"])
    md = (tmp_path / "5.md").read_text()
    assert "| best constant (dev) |" in md and "Each arm minus the best constant" in md
    # Some columns only (--only_tasks): never over a table holding other columns, which it would
    # replace (refused before any run); beside it, their runs are reused, the md names the others.
    messages.clear()
    with pytest.raises(BertJaxError, match=r"holds table 5's sst2, mrpc, squad too, which"):
        ablate("5", scale, str(tmp_path), progress=messages.append, only_tasks=("conll",))
    assert not messages
    for name in ("5.json", "5.md", "5.rows.npz"):
        (tmp_path / name).rename(tmp_path / f"full-{name}")
    one = ablate("5", scale, str(tmp_path), progress=messages.append, only_tasks=("conll",))
    assert not any(m.startswith(("pretraining", "to do:")) for m in messages)
    assert one["tasks_left_out"] == ["sst2", "mrpc", "squad"]
    assert one["arms"] == {a: {"conll": r["conll"]} for a, r in docs["5"]["arms"].items()}
    assert set(one["intervals"]) == {"conll"}
    assert "left out: sst2, mrpc, squad." in (tmp_path / "5.md").read_text()
    with pytest.raises(BertJaxError, match="--only_tasks: table 5 has no task cola"):
        ablate("5", scale, str(tmp_path), only_tasks=("conll", "cola"))

    _units_assemble_the_same_table(tmp_path, scale, docs["5"])
    _a_carried_unit_ends_where_the_uncut_one_did(tmp_path, scale, monkeypatch)


def _units_assemble_the_same_table(tmp_path: pathlib.Path, scale, doc5: dict) -> None:
    """Every finished run was kept in the units dir as it finished: a fresh workdir (another
    machine) assembles the same table from them without training; a unit run there joins the
    others; a unit made on other data is refused, and a new run on a unit's pretraining, whose
    checkpoint stayed behind, too."""
    import shutil

    from bert_jax.ablations import provenance
    from bert_jax.ablations.harness import Harness
    from bert_jax.ablations.run import ablate
    from bert_jax.ablations.unit_jobs import parse_units, plan, seeded

    units, messages = tmp_path / "units", []
    no_nsp = tables.get("5").arms(scale)[1].pretrain.key  # Figure 5's MLM, Table 6's L1-H64-A2
    manifest = json.loads((units / "quick" / no_nsp / "manifest.json").read_text())
    assert manifest["unit"] == no_nsp and manifest["made_by"] == [
        f"{provenance.commit()} on {provenance.device()}"]
    assert list((units / "quick" / no_nsp / "finetune").glob(f"{no_nsp}@*"))  # Figure 5's
    assert not list(units.glob("quick/*/pretrain/*/checkpoints"))
    elsewhere = tmp_path / "elsewhere"
    assert ablate("5", scale, str(elsewhere), progress=messages.append,
                  units_dir=str(units)) == doc5  # fmt: skip
    assert not any(m.startswith("pretraining") for m in messages)
    assert not list(elsewhere.glob("pretrain/*/checkpoints"))
    assert doc5["provenance"]["text_sha256"] == manifest["text_sha256"]
    with pytest.raises(BertJaxError, match="finished .done.json. but without its checkpoint"):
        ablate("5", dataclasses.replace(scale, seeds=2), str(tmp_path / "more_seeds"),
               only_tasks=("mrpc",), progress=messages.append, units_dir=str(units))  # fmt: skip
    # A second pretraining seed's job whose rate is chosen on seed 0's run, not chosen yet
    # where that run was pretrained: the unit that makes the choice is named.
    no_nsp_arm = tables.get("5").arms(scale)[1]
    choosing = Harness(str(elsewhere), dataclasses.replace(scale, finetune_lrs=(1e-4, 5e-5)))
    with pytest.raises(BertJaxError, match=r"No NSP:1's rate for conll is chosen on this run .*"
                                           r"finish --units 'No NSP:0' there"):  # fmt: skip
        choosing.learning_rate(seeded(no_nsp_arm, 1), "conll")
    # A machine with every unit but No NSP's: the plan names it, `units` runs it, and the table
    # from all of them is the first one's.
    partial = tmp_path / "partial"
    shutil.copytree(units, partial)
    shutil.rmtree(partial / "quick" / no_nsp)
    # --assemble trains nothing: an arm with no unit is left out, with every claim on it. It
    # reads the units and writes nothing there, not even a cache it had to make again.
    bert = tables.get("5").arms(scale)[0].pretrain.key
    cache = pathlib.Path("quick", bert, "pretrain", bert, "baselines.json")
    (partial / cache).unlink()
    before = {f: f.stat().st_mtime_ns for f in partial.rglob("*") if f.is_file()}
    lacking = ablate("5", scale, str(tmp_path / "lacking"), progress=messages.append,
                     units_dir=str(partial), assemble=True)  # fmt: skip
    assert {f: f.stat().st_mtime_ns for f in partial.rglob("*") if f.is_file()} == before
    assert (tmp_path / "lacking" / cache.relative_to("quick", bert)).exists()
    shutil.copy(units / cache, partial / cache)
    assert lacking["assembled_from_units"]["arms_left_out"] == ["No NSP"]
    assert lacking["arms"] == {a: r for a, r in doc5["arms"].items() if a != "No NSP"}
    assert all("No NSP" not in pair.split(" - ") for by_pair in lacking["intervals"].values()
               for pair in by_pair)  # fmt: skip
    assert not list((tmp_path / "lacking").glob("pretrain/*/checkpoints"))
    assert "left out with their claims: No NSP." in (tmp_path / "lacking" / "5.md").read_text()
    with pytest.raises(BertJaxError, match="--assemble: give --units_dir"):
        ablate("5", scale, str(tmp_path / "lacking"), units_dir=str(partial), assemble=True,
               units=(("BERT", 0),))  # fmt: skip
    other = tmp_path / "other"
    out = plan("5", scale, str(other), units_dir=str(partial), progress=messages.append)
    assert [u["arms"] for u in out if any(o["runs"] for o in u["left"].values())] == [
        ["No NSP:0"]]  # fmt: skip
    assert messages[-1].startswith('run them: bert-jax ablate --table 5 --units "No NSP:0"')
    units_arg = parse_units(messages[-1].split('"')[1])
    assert ablate("5", scale, str(other), progress=messages.append, units_dir=str(partial),
                  units=units_arg) is None  # fmt: skip
    assert not (other / "5.json").exists()
    (said,) = [m for m in messages if m.startswith("units No NSP:0 finished; ")]
    assert int(said.split("; ")[1].split()[0]) > 10, said  # its runs' files, kept as each ended
    # The unit run for Table 5 alone holds what the other tables made on its checkpoints when
    # they ran in full (Figure 5's points, Table 6's held-out loss, NSP/SOP's pair rows).
    def files(root: pathlib.Path) -> set[str]:
        return {str(f.relative_to(root)) for f in root.rglob("*") if f.is_file()}

    assert files(partial / "quick" / no_nsp) == files(units / "quick" / no_nsp)
    third = ablate("5", scale, str(tmp_path / "third"), progress=messages.append,
                   units_dir=str(partial))  # fmt: skip
    assert third["arms"] == doc5["arms"] and third["intervals"] == doc5["intervals"]
    # A second fine-tuning seed needs checkpoints no unit carries: the plan says where to go.
    wider = plan("5", dataclasses.replace(scale, seeds=2), str(tmp_path / "wider"),
                 units_dir=str(partial), progress=messages.append)  # fmt: skip
    assert all("its checkpoint not here" in m for m in messages[-len(wider) - 1:-1]), messages
    # A second random-init run, on conll only: assembled, each arm has the runs it has; a unit
    # lacking a task's runs is named, not used, for a table that needs them.
    ablate("5", dataclasses.replace(scale, pretrain_seeds=2), str(other), units_dir=str(partial),
           units=(("random init", 1),), only_tasks=("conll",), progress=messages.append)
    conll = ablate("5", scale, str(tmp_path / "fifth"), progress=messages.append,
                   units_dir=str(partial), only_tasks=("conll",), assemble=True)  # fmt: skip
    used = conll["assembled_from_units"]
    assert used["runs"]["random init"] == [0, 1] and used["runs"]["BERT"] == [0]
    means = used["run_means"]["random init"]["conll"]  # one fine-tuning seed a run at quick
    assert len(means) == 2 and means[0] == doc5["arms"]["random init"]["conll"]["median"]
    assert conll["intervals"]["conll"]["BERT - random init"]["units"] == [1, 2]
    assert conll["provenance"]["pretrain_seeds"]["random init"] == 2
    whole = ablate("5", scale, str(tmp_path / "fifth"), progress=messages.append,
                   units_dir=str(partial), assemble=True)  # fmt: skip
    assert whole["assembled_from_units"]["incomplete"] == {"random init": [1]}
    assert whole["arms"] == doc5["arms"]
    with pytest.raises(BertJaxError, match="table 5 has no arm 'MLM'"):
        ablate("5", scale, str(other), units_dir=str(partial), units=(("MLM", 0),))
    with pytest.raises(BertJaxError, match="give --pretrain_seeds 3 or more"):
        ablate("5", scale, str(other), units_dir=str(partial), units=(("No NSP", 2),))
    # A unit made before units kept its held-out pair rows (NSP/SOP's "none"): its finished
    # pretraining is not enough; the plan names the rows, the assembly leaves the run out, and
    # scoring it where its checkpoint is not is refused by name.
    older = tmp_path / "older"
    shutil.copytree(units, older)
    for rows in (older / "quick" / no_nsp).rglob("pair_rows_*.json"):
        rows.unlink()
    messages.clear()
    plan("nsp_sop", scale, str(tmp_path / "older_plan"), units_dir=str(older),
         progress=messages.append)  # fmt: skip
    (said,) = [m for m in messages if m.startswith("  none:0 ")]
    assert "to do: its checkpoint's nsp, sop rows" in said and "checkpoint not here" in said
    messages.clear()  # beside fine-tuning runs left, both are said
    plan("5", dataclasses.replace(scale, seeds=2), str(tmp_path / "older_wider"),
         units_dir=str(older), progress=messages.append)  # fmt: skip
    (said,) = [m for m in messages if m.startswith("  No NSP:0")]
    assert "fine-tuning run" in said and ", its checkpoint's nsp, sop rows" in said, said
    nsp_sop = ablate("nsp_sop", scale, str(tmp_path / "older_asm"), units_dir=str(older),
                     assemble=True, progress=messages.append)  # fmt: skip
    assert nsp_sop["assembled_from_units"]["incomplete"] == {"none": [0]}
    assert "none" not in nsp_sop["arms"] and set(nsp_sop["arms"]) == {"NSP", "SOP"}
    from bert_jax.ablations import checks
    from bert_jax.ablations.harness import Harness

    bare = Harness(str(tmp_path / "older_asm"), scale, progress=print)
    with pytest.raises(BertJaxError, match="pair_rows_nsp.json, not made yet, needs it"):
        checks.pair_rows(bare, tables.get("nsp_sop").arms(scale)[0], "nsp")
    # Units made from other pretraining text are refused by name.
    (partial / "quick" / no_nsp / "manifest.json").write_text(
        json.dumps({**manifest, "text_sha256": "0" * 64}))  # fmt: skip
    with pytest.raises(BertJaxError, match=f"{no_nsp}: a unit made with another text_sha256"):
        ablate("5", scale, str(tmp_path / "fourth"), units_dir=str(partial))


def _same_records(ours: pathlib.Path, theirs: pathlib.Path) -> list[str]:
    """The records (scores, per-example rows, held-out evaluations) under `ours`, each checked
    equal to the same file under `theirs`; returns their paths."""
    checked = []
    for f in sorted(ours.rglob("*")):
        if f.suffix not in (".json", ".npz") or f.name in ("manifest.json", "config.json",
                                                             "run_time.json"):  # fmt: skip
            continue
        other = theirs / f.relative_to(ours)
        if f.suffix == ".json":
            assert json.loads(f.read_text()) == json.loads(other.read_text()), f
        else:
            a, b = np.load(f), np.load(other)
            assert set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a), f
        checked.append(str(f.relative_to(ours)))
    return checked


def _a_carried_unit_ends_where_the_uncut_one_did(tmp_path: pathlib.Path, scale, monkeypatch):
    """A unit stopped by SIGTERM halfway through its pretraining carries its latest checkpoint
    into the units dir; a fresh workdir (another machine) continues it from there and ends with
    the uncut unit's scores and held-out rows, bit for bit. Figure 5's points before the carried
    step are left to the first machine; the carried files go once the run ends."""
    import os
    import shutil
    import signal

    from bert_jax import checkpoint
    from bert_jax.ablations.run import ablate
    from bert_jax.ablations.units import carried_step

    carried, messages, signalled = tmp_path / "carried", [], []
    key = tables.get("5").arms(scale)[1].pretrain.key  # No NSP
    unit = carried / "quick" / key
    half = scale.steps // 2
    at = {"step": half}  # of the first training loop that reaches it
    save = checkpoint.Checkpointer.maybe_save

    def signalled_once_at(self, step, state, input_state=None) -> bool:
        saved = save(self, step, state, input_state)
        if step == at["step"] and not signalled:  # the stop's end, as `kill -TERM` sends it
            signalled.append(step)
            os.kill(os.getpid(), signal.SIGTERM)
        return saved

    monkeypatch.setattr(checkpoint.Checkpointer, "maybe_save", signalled_once_at)
    one = {"units_dir": str(carried), "units": (("No NSP", 0),), "only_tasks": ("conll",),
           "progress": messages.append}  # fmt: skip
    with pytest.raises(BertJaxError, match=f"stopped by SIGTERM at step {half + 1} of"):
        ablate("5", scale, str(tmp_path / "cut"), **one)
    monkeypatch.setattr(checkpoint.Checkpointer, "maybe_save", save)
    said = f"{key}: step {half + 1} of {scale.steps} carried to"
    assert any(m.startswith(said) for m in messages), messages
    made = {str(f.relative_to(unit)): f.read_bytes() for f in unit.rglob("*") if f.is_file()}
    assert f"carry/{half + 1}/checkpoint/state/manifest.ocdbt" in made, sorted(made)
    assert not (unit / "pretrain" / key / "done.json").exists()
    # --carry, for a run killed outright: its last checkpoint, the same files again.
    shutil.rmtree(unit / "carry")
    ablate("5", scale, str(tmp_path / "cut"), carry=True, **one)
    assert {k: v for k, v in made.items() if k.startswith("carry/")} == {
        str(f.relative_to(unit)): f.read_bytes() for f in (unit / "carry").rglob("*")
        if f.is_file()}  # fmt: skip
    messages.clear()
    ablate("5", scale, str(tmp_path / "resumed"), **one)
    assert f"{key}: continues from its step-{half + 1} checkpoint" in "\n".join(messages)
    left_out = [m for m in messages if m.startswith("  left out:")]
    assert len(left_out) == 2 and f"no step-{half // 2} checkpoint" in left_out[0], left_out
    assert not (unit / "carry").exists()
    log = (tmp_path / "resumed" / "pretrain" / key / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line)["step"] for line in log if "grad_norm" in line]
    assert steps == list(range(1, scale.steps + 1))  # the carried part of its log, then its own
    checked = _same_records(unit, tmp_path / "units" / "quick" / key)
    assert f"pretrain/{key}/done.json" in checked and f"pretrain/{key}/mlm_loss_rows.npz" in checked
    assert sum(p.endswith("eval_results.json") for p in checked) == 2, checked  # conll, @12
    # A second fine-tuning seed stopped by SIGTERM: the finished run's last checkpoint is carried
    # for it, and the first workdir (which has the checkpoints at 4 and 8, not 12) finishes it.
    two = dataclasses.replace(scale, seeds=2)
    at["step"] = 2
    signalled.clear()
    monkeypatch.setattr(checkpoint.Checkpointer, "maybe_save", signalled_once_at)
    with pytest.raises(BertJaxError, match="stopped by SIGTERM at step 3 of"):
        ablate("5", two, str(tmp_path / "resumed"), **one)
    monkeypatch.setattr(checkpoint.Checkpointer, "maybe_save", save)
    assert carried_step(unit) == scale.steps and signalled == [2]
    messages.clear()
    ablate("5", two, str(tmp_path / "cut"), **one)
    assert f"{key}: continues from its step-{scale.steps} checkpoint" in "\n".join(messages)
    assert [m.split(",")[0] for m in messages if m.startswith("  left out:")] == [
        f"  left out: arm 'MLM@{scale.steps * 3 // 4}'"]  # fmt: skip
    made = {str(p.relative_to(unit)).split("/conll/")[0] for p in unit.rglob("seed1")}
    assert made == {f"finetune/{key}", f"finetune/{key}@{half // 2}", f"finetune/{key}@{half}"}
    assert not (unit / "carry").exists()
