"""`bert-jax ablate --batch --learning_rate --warmup --pretrain_dropout`: the flags
override the scale's pretraining recipe, and the `host` recipe before 2026-11-29 (the one the flag
help and bert_jax/ablations/scales.py name) gives the old numbers back. Nothing trains.

  pytest tests/test_ablation_host_recipe.py     # a few seconds
"""

from __future__ import annotations

import dataclasses
import re

import pytest
from absl import flags
from absl.testing import flagsaver

from bert_jax.ablations import run, scales
from bert_jax.ablations.run import scale_for
from bert_jax.ablations.scales import SCALES
from bert_jax.errors import BertJaxError

# The host scale as it was before 2026-11-29 (git show 18fe017:bert_jax/ablations/scales.py).
OLD_HOST = dataclasses.replace(SCALES["host"], steps=100_000, batch=256, learning_rate=5e-4,
                               warmup=2_000, dropout=0.1)  # fmt: skip
OLD_FLAGS = re.compile(r"--steps 100000 --batch 256 --learning_rate 5e-4 --warmup 2000 "
                       r"--pretrain_dropout 0\.1")  # fmt: skip


def _words(text: str) -> str:
    return " ".join(text.split())


def test_overrides_reach_the_scale():
    s = scale_for("cpu", batch=64, learning_rate=3e-4, warmup=7, dropout=0.05)
    assert (s.batch, s.learning_rate, s.warmup, s.dropout) == (64, 3e-4, 7, 0.05)
    assert dataclasses.replace(s, batch=32, learning_rate=1e-3, warmup=300,
                               dropout=0.0) == SCALES["cpu"]  # fmt: skip
    assert scale_for("host") == SCALES["host"]  # unset: the scale's own
    # 0 is a recipe for warmup and dropout (the tpu scale's are 10k and 0.1), not "the scale's"
    tpu = scale_for("tpu", warmup=0, dropout=0.0)
    assert (tpu.warmup, tpu.dropout) == (0, 0.0)
    assert scale_for("cpu", quick=True, batch=8).batch == 8  # --quick takes them too


@pytest.mark.parametrize("kwargs, flag", [
    ({"batch": -256}, "--batch=-256"),
    ({"learning_rate": -1e-3}, "--learning_rate=-0.001"),
    ({"warmup": -1}, "--warmup=-1"),
    ({"dropout": -0.1}, "--pretrain_dropout=-0.1"),
    ({"dropout": 1.0}, "--pretrain_dropout=1.0"),
])  # fmt: skip
def test_bad_values_are_refused_by_name(kwargs, flag):
    with pytest.raises(BertJaxError, match=re.escape(flag)):
        scale_for("host", **kwargs)


def test_the_old_host_recipe_by_flags(monkeypatch, tmp_path):
    """The flags that the --batch help and the scales docstring give for the old recipe, parsed
    by the command, reach `ablate` as the old host scale."""
    from bert_jax.commands import ablate as command

    old = OLD_FLAGS.search(_words(flags.FLAGS["batch"].help))
    assert old and OLD_FLAGS.search(_words(scales.__doc__)), "named in the help and the docs"
    seen = {}
    monkeypatch.setattr(run, "ablate", lambda table, scale, *a, **k: seen.update(scale=scale))
    argv = ["ablate", "--table=5", "--scale=host", f"--workdir={tmp_path}", *old[0].split()]
    with flagsaver.flagsaver():
        flags.FLAGS(argv)
        command.main(["ablate"])
    assert seen["scale"] == OLD_HOST
    with flagsaver.flagsaver():  # and no flag leaves the scale as it is
        flags.FLAGS(argv[:4])
        command.main(["ablate"])
    assert seen["scale"] == SCALES["host"]


def test_plans_carry_the_scales_pretraining_dropout():
    """A --topology plan's pretraining overrides hold the scale's dropout (the config's default
    is 0.1; the host recipe's is 0)."""
    from bert_jax.ablations.tables import base
    from bert_jax.ablations.tpu import run_overrides

    arm = base.Pretrain("mlm", SCALES["host"].model, SCALES["host"].steps)
    for scale, dropout in ((scale_for("host"), 0.0), (scale_for("host", dropout=0.1), 0.1),
                           (scale_for("tpu"), 0.1)):  # fmt: skip
        out = run_overrides(arm, scale, "gs://b/data", 1)
        assert out["hidden_dropout_prob"] == out["attention_probs_dropout_prob"] == dropout
