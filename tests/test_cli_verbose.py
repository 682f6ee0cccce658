"""A user-facing error is one line; with --verbose the traceback also shows the exception that
the message explains (kept by the CLI although the code raises `... from None`)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np


def test_verbose_shows_the_cause_of_a_one_line_error(tmp_path):
    from safetensors.numpy import save_file

    save_file({"x": np.zeros(1, np.float32)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text("{not json")
    cmd = [sys.executable, "-m", "bert_jax.cli", "convert", f"--init_checkpoint={tmp_path}",
           f"--output_dir={tmp_path / 'out'}"]  # fmt: skip
    quiet = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 2
    assert quiet.stderr.strip().startswith(
        f"bert-jax: error: {tmp_path}/config.json: not valid JSON (Expecting property name"
    )
    assert "Traceback" not in quiet.stderr and len(quiet.stderr.strip().splitlines()) == 1

    verbose = subprocess.run([*cmd, "--verbose"], capture_output=True, text=True, timeout=300)
    assert verbose.returncode != 0
    assert "json.decoder.JSONDecodeError: Expecting property name" in verbose.stderr
    assert "bert_jax.errors.BertJaxError:" in verbose.stderr
