"""`bert-jax generate` for the left-to-right LM of the ablations (a causal BERT): the continuation
of `[CLS] line` equals transformers' BertLMHeadModel `generate` on the same weights, greedy and
with beam search, stopping at [SEP]."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from bert_jax.arch.bert.causal_lm import CausalLMGenerator
from bert_jax.arch.bert.pretrained import load_pretrained
from bert_jax.arch.seq2seq.decoding import GenerateSettings
from bert_jax.errors import BertJaxError

LINES = ["the bank robber fled .", "a river bank is", "he said that"]


@pytest.fixture(scope="module")
def causal_dir(tmp_path_factory, uncased_vocab):
    """A random BertLMHeadModel (is_decoder) written by transformers, weights scaled so that
    greedy paths vary, with the real uncased vocab."""
    import transformers

    d = tmp_path_factory.mktemp("causal_bert")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=64, is_decoder=True,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    model = transformers.BertLMHeadModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" not in name:
                p.copy_(torch.randn_like(p) * (0.02 if "bias" in name else 0.25))
    model.save_pretrained(d)
    shutil.copy(uncased_vocab, d / "vocab.txt")
    return d


def _theirs(causal_dir, prompts: np.ndarray, beams: int, eos: int) -> list[list[int]]:
    import transformers

    model = transformers.BertLMHeadModel.from_pretrained(causal_dir).eval()
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor(prompts),
                             attention_mask=torch.ones_like(torch.tensor(prompts)),
                             max_new_tokens=8, do_sample=False, num_beams=beams,
                             eos_token_id=eos, pad_token_id=0).numpy()  # fmt: skip
    return out[:, prompts.shape[1] :].tolist()


def test_greedy_and_beam_equal_transformers(causal_dir):
    pre = load_pretrained(causal_dir)
    assert pre.config.causal
    prompts = np.random.RandomState(0).randint(1000, 30000, (4, 6))
    prompts[:, 0] = 101  # [CLS]
    # EOS: a token the greedy paths reach, so stopping is exercised.
    first = CausalLMGenerator(pre.config, GenerateSettings(max_new_tokens=8), eos_id=102)
    greedy = first(pre.params, [list(p) for p in prompts])
    eos = int(np.bincount(greedy.reshape(-1)).argmax())
    # Greedy with that EOS; beam search (whose EOS rules the seq2seq tests check against
    # transformers on the same search code) with [SEP], which these weights never pick.
    for beams, stop in ((1, eos), (3, 102)):
        gen = CausalLMGenerator(pre.config, GenerateSettings(max_new_tokens=8, num_beams=beams),
                                eos_id=stop)  # fmt: skip
        ours = gen(pre.params, [list(p) for p in prompts]).tolist()
        theirs = _theirs(causal_dir, prompts, beams, stop)
        for row_ours, row_theirs in zip(ours, theirs, strict=True):  # theirs may stop early
            assert row_ours[: len(row_theirs)] == row_theirs, (beams, ours, theirs)
        if beams == 1:
            assert any(eos in row and row.index(eos) < 7 for row in ours)


def test_generate_command_on_a_causal_bert(causal_dir, tmp_path):
    import transformers

    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "bert_jax.cli", "generate", f"--init_checkpoint={causal_dir}",
         f"--input_file={tmp_path / 'in.txt'}", f"--output_file={tmp_path / 'out.jsonl'}",
         "--max_new_tokens=8"], capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    tok = transformers.BertTokenizerFast(str(causal_dir / "vocab.txt"), do_lower_case=True)
    for row, line in zip(rows, LINES, strict=True):
        prompt = np.asarray([tok(line)["input_ids"][:-1]])  # [CLS] pieces, no [SEP]
        theirs = _theirs(causal_dir, prompt, 1, tok.sep_token_id)[0]
        assert row["input"] == line and row["output_ids"] == theirs[: len(row["output_ids"])]
        kept = [i for i in row["output_ids"] if i != tok.sep_token_id]
        assert row["output"] == tok.decode(kept, clean_up_tokenization_spaces=False)


def test_a_bidirectional_bert_is_refused(tiny_hf_dir):
    pre = load_pretrained(tiny_hf_dir)
    with pytest.raises(BertJaxError, match="not a left-to-right LM"):
        CausalLMGenerator(pre.config, GenerateSettings(), eos_id=102)
