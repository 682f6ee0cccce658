"""`bert-jax ablate --scale tpu` (and `--scale host --topology`): every table's plan, each run's
steps compiled ahead of time for the slice. Its own file so that the suite's two workers can run
it beside the quick ablation run (tests/test_ablate_quick_run.py) instead of after it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bert_jax.ablations import tables
from bert_jax.ablations.tables import table8
from bert_jax.errors import BertJaxError


@pytest.mark.slow
@pytest.mark.usefixtures("least_tpu_effort")  # the fits are compared with each other only
def test_tpu_plan_fit_checks_every_run_of_every_table_and_writes_the_launch_script(tmp_path):
    """Every table's `--scale tpu` plan with the paper's recipe on a smaller model (Table 6's grid
    shrunk to that model): the same code path, each run's phase-1 and phase-2 step compiled for a
    v4-32 with libtpu's compile-only devices. The BERT-base plans are measured in
    experiments/ablations/HISTORY.md."""
    from bert_jax.ablations import tpu
    from bert_jax.ablations.run import scale_for

    scale = dataclasses.replace(scale_for("tpu"), model="L1-H64-A2", sizes=((1, 64, 2),))
    tpu._FITS.clear()
    with pytest.raises(BertJaxError, match="released model on the built-in suite"):
        tpu.plan("calibration", scale, str(tmp_path), "v4-32", "my-v4", {})
    docs = {t: tpu.plan(t, scale, str(tmp_path), "v4-32", "my-v4", {"squad": "gs://b/squad"})
            for t in tables.names() if t != "calibration"}  # fmt: skip
    for table, doc in docs.items():
        trained = {k: r for k, r in doc["runs"].items() if not k.startswith("random-")}
        assert trained, table
        for key, run in trained.items():
            assert run["fit"]["phase1"]["fits"] and run["fit"]["phase2"]["fits"], key
            # 512 tokens and 80 predictions need more memory than 128 and 20
            assert run["fit"]["phase2"]["required_gib"] > run["fit"]["phase1"]["required_gib"]
    assert sorted(docs["8"]["runs"]) == sorted(
        [f"mlm-L1-H64-A2-{m.replace('/', '.')}-s900000" for m in table8.MIXES]
        + ["random-L1-H64-A2-mlm_nsp"]
    )
    # the six masking mixes are one program: compiled once, not six times
    assert len({json.dumps(r["fit"], sort_keys=True) for r in docs["8"]["runs"].values()
                if "fit" in r}) == 1  # fmt: skip
    # two phases of the distinct programs: MLM + pair head (NSP, SOP), MLM alone (No NSP,
    # ELECTRA's full-sentence MLM arm), LTR, ELECTRA
    assert len(tpu._FITS) == 2 * 4
    # --scale host --topology v4-8: the one-host recipe, one phase, bfloat16, on a single TPU VM
    host = dataclasses.replace(scale_for("host"), model="L1-H64-A2", sizes=((1, 64, 2),))
    one_vm = tpu.plan("nsp_sop", host, str(tmp_path / "host"), "v4-8", "my-vm", {})
    assert all("phase2" not in r["fit"] and r["fit"]["phase1"]["fits"]
               for r in one_vm["runs"].values() if "fit" in r)  # fmt: skip
    assert {r["phase1"]["dtype"] for r in one_vm["runs"].values() if "fit" in r} == {"bfloat16"}
    host_script = (tmp_path / "host" / "plan" / "nsp_sop.sh").read_text()
    assert "-p2" not in host_script and host_script.count(" bert-jax pretrain ") == 3

    script = (tmp_path / "plan" / "5.sh").read_text().splitlines()
    pretrain = [line for line in script if " bert-jax pretrain " in line]
    assert len(pretrain) == 2 * 3 + 1  # phase 1 and 2 per run, one lr-0 step for random init
    assert all(line.startswith("python tpu_setup/tpu.py run --name my-v4 -- ") for line in pretrain)
    assert sum("--config.max_seq_length=512" in line for line in pretrain) == 3
    finetune = [line for line in script if " bert-jax finetune " in line]
    assert len(finetune) == 5 * 4
    assert sum("--config.bilstm_size=768" in line for line in finetune) == 4
    assert sum("--config.data_dir=gs://b/squad" in line for line in finetune) == 5
    assert all("--config.learning_rate=5e-05 --config.num_train_epochs=3.0" in line
               for line in finetune)  # fmt: skip
    assert sum("--config.keep_checkpoint_every_steps=225000" in line for line in pretrain) == 3
    # Figure 5: each point fine-tunes phase 1's checkpoint of its step, into its own directory
    fig5 = [line for line in (tmp_path / "plan" / "fig5.sh").read_text().splitlines()
            if " bert-jax finetune " in line]  # fmt: skip
    mlm = f"{tmp_path}/pretrain/mlm-L1-H64-A2-80.10.10-s900000"
    out = f"{mlm.replace('pretrain', 'finetune')}@450000/conll/e3-lr5e-05-d0.1"
    assert f"--workdir {out} " in "\n".join(fig5)
    at_450k = [line for line in fig5 if "@450000/" in line and "/mlm-" in line]
    assert len(at_450k) == 1 and f"--config.init_checkpoint={mlm}-p1 " in at_450k[0]
    assert "--config.init_checkpoint_step=450000" in at_450k[0]
    assert len({line.split(" --workdir ")[1].split()[0] for line in fig5}) == len(fig5) == 9
    with pytest.raises(BertJaxError, match=r"MLM@2500: no checkpoint is kept at step 2500; give "
                       r"--steps whose quarters are multiples of 5000"):  # fmt: skip
        tpu.plan("fig5", dataclasses.replace(scale, steps=10_000), str(tmp_path), "v4-32", "", {})
    mixes = (tmp_path / "plan" / "8.sh").read_text()
    assert "--config.mask_prob=0.0 --config.random_prob=0.8" in mixes  # 0/20/80: RND 80%
