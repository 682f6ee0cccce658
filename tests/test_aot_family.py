"""BERT-family pretraining steps compiled ahead of time for a TPU slice on this CPU machine:
ELECTRA-Small's preset as it stands (generator + discriminator in one step), and a distillation
step whose teacher is only a config.json written by transformers (no weights: compiling needs
shapes). The other family presets are compiled by experiments/tpu_family_table.py (1-5 minutes
each here, too slow for the suite); its table is in the README."""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import re

import pytest

pytest.importorskip("libtpu", reason="libtpu (pip install 'jax[tpu]') is not installable here")
transformers = pytest.importorskip("transformers")

import jax  # noqa: E402
from tpu_compile import least_effort  # noqa: E402

from bert_jax.aot.pretraining import compile_pretraining  # noqa: E402
from bert_jax.configs import distilbert, electra  # noqa: E402

GiB = 1024**3


@pytest.mark.slow  # ELECTRA-Small's preset compiled for a TPU slice: 24 s on 2 idle cores
def test_electra_small_preset_compiles_for_v4_8_and_fits():
    c = electra.get_config("small")
    c.scan_layers, c.dynamic_masking = True, False  # masking runs on the host: same step
    with least_effort():
        report, trainer = compile_pretraining(c, "v4-8")
    assert report.fits and 0 < report.memory.peak_bytes < 32 * GiB
    params = trainer.abstract_state().params
    assert set(params) == {"bert", "discriminator", "generator"}
    # The generator reads the discriminator's token and position tables: it has none of its own.
    assert "word_embeddings" not in str(jax.tree_util.tree_structure(params["generator"]))
    width = params["generator"]["encoder"]["layers"]["intermediate"]["kernel"].shape[-1]
    assert width == 1024 // 4  # a quarter of the discriminator's FFN (hidden 256 -> 64)


def test_distillation_step_compiles_from_a_teacher_config_without_weights(tmp_path):
    transformers.BertConfig(
        vocab_size=512, hidden_size=64, num_hidden_layers=4, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=128,
    ).save_pretrained(tmp_path)  # fmt: skip
    assert not list(tmp_path.glob("*.safetensors"))
    c = distilbert.get_config("cpu")
    c.teacher, c.max_seq_length, c.max_predictions_per_seq = str(tmp_path), 64, 10
    c.global_batch_size, c.scan_layers = 16, True
    c.mesh.data, c.mesh.fsdp = 1, -1
    with least_effort():
        report, trainer = compile_pretraining(c, "v4-8")
    assert report.fits
    task = trainer.task
    assert task.bert_config.num_hidden_layers == 2 and task.teacher_config.num_hidden_layers == 4
    state = trainer.abstract_state()
    # The frozen teacher has parameters but no optimizer moments.
    assert "teacher" in state.params
    moments = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(
        state.opt_state)]  # fmt: skip
    assert moments and not any("'teacher']['bert'" in m for m in moments)


TABLE_SCRIPT = pathlib.Path(__file__).parents[1] / "experiments" / "tpu_family_table.py"


@pytest.fixture(scope="module")
def family_table():
    """experiments/tpu_family_table.py as a module, and its committed rows by preset."""
    spec = importlib.util.spec_from_file_location("tpu_family_table", TABLE_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = {}
    for line in (TABLE_SCRIPT.parent / "tpu_family_table.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and cells[0].endswith((":base", ":large", ":xlarge", ":small")):
            rows[cells[0]] = cells
    return module, rows


def test_the_family_fit_table_has_every_tpu_preset_at_its_recipe_batch(family_table, tmp_path):
    """The README's family fit table is generated offline (all nine presets take ~20 minutes to
    compile here): every TPU preset has a row, at the batch and length its config has now."""
    module, committed = family_table
    rows = dict(committed)  # the fixture is shared: the ALBERT test reads it after this one
    for family, preset, slice_name, knobs in module.SETUPS:
        c = module.preset_config(family, preset, knobs, tmp_path / "teacher")
        row = rows.pop(f"{family}.py:{preset}")
        assert row[1].startswith(slice_name + " ") and row[5] == "yes", row
        assert row[2] == f"{c.global_batch_size} x {c.max_seq_length}", row
    assert not rows, f"rows without a setup: {sorted(rows)}"
    # ... and every preset but `cpu` that the config files offer has a setup.
    offered = set()
    for family in ("roberta", "albert", "electra", "distilbert", "modernbert"):
        with pytest.raises(ValueError) as error:  # the message lists the presets
            importlib.import_module(f"bert_jax.configs.{family}").get_config("?")
        names = re.split(r", | or ", str(error.value).split("use ")[1].removeprefix("one of "))
        offered |= {(family, name) for name in names if name != "cpu"}
    assert offered == {(f, p) for f, p, _, _ in module.SETUPS}


@pytest.mark.slow  # ALBERT-base's preset compiled for a v4-32 slice: about 35 s here
def test_albert_base_row_of_the_family_fit_table_still_holds(family_table, tmp_path):
    """ALBERT-base's row (shared layers, factorised embeddings, SOP, LAMB) recompiled: the memory
    must match the committed table."""
    module, rows = family_table
    setup = next(s for s in module.SETUPS if s[:2] == ("albert", "base"))
    row = module.measure(*setup, tmp_path / "teacher")
    assert row["fits"] and row["devices"] == 16 and row["batch"] == 4096 and row["seq"] == 512
    gib = float(rows["albert.py:base"][4].split()[0])
    assert row["peak"] / GiB == pytest.approx(gib, abs=0.01), (row["peak"] / GiB, gib)
