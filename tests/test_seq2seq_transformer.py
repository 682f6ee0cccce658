"""The Transformer (Vaswani et al.: post-LN, sinusoidal positions, shared embeddings, label
smoothing 0.1) as a configuration of the encoder-decoder family, and the LSTM + Luong attention
baseline, each trained through the one loop on a held-out transduction task (reversing symbol
sequences) and decoded with the same beam search."""

from __future__ import annotations

import ml_collections
import numpy as np
import pytest


def _reversal(n: int, seed: int, length: int = 12) -> dict[str, np.ndarray]:
    rs = np.random.RandomState(seed)
    inputs = np.zeros((n, length), np.int32)
    targets = np.zeros((n, length), np.int32)
    for i in range(n):
        k = rs.randint(3, 9)
        s = rs.randint(3, 23, k)  # 0 pad, 1 EOS, 2 unused
        inputs[i, :k], inputs[i, k] = s, 1
        targets[i, :k], targets[i, k] = s[::-1], 1
    return {"inputs": inputs, "targets": targets}


def _train_and_beam_decode(tmp_path, cfg, model, steps: int, lr: float) -> float:
    """Exact-match rate of 4-beam decoding on held-out sequences after training."""
    from bert_jax.arch.seq2seq.decoding import GenerateSettings, Seq2SeqGenerator, trim
    from bert_jax.arch.seq2seq.train_task import Seq2SeqTask
    from bert_jax.input.seq2seq import Seq2SeqBatches
    from bert_jax.train.config import training_config
    from bert_jax.train.loop import train

    train_data, test = _reversal(20000, 0), _reversal(200, 1)
    seen = {tuple(r) for r in train_data["inputs"]}
    held_out = [i for i, r in enumerate(test["inputs"]) if tuple(r) not in seen]
    test = {k: v[held_out] for k, v in test.items()}
    task = Seq2SeqTask(cfg, 64, 12, 12, train_data=Seq2SeqBatches(64, 0, arrays=train_data),
                       model=model)  # fmt: skip
    c = training_config()
    c.update(learning_rate=lr, train_steps=steps, warmup_steps=50, log_every_steps=100,
             checkpoint_every_steps=steps, async_checkpoints=False, weight_decay=0.0)  # fmt: skip
    c.mesh = ml_collections.ConfigDict({"data": 1, "fsdp": 1, "tensor": 1})
    result = train(c, task, str(tmp_path / "wd"), workdir_config={"model": cfg.to_dict()})
    gen = Seq2SeqGenerator(task.model, GenerateSettings(max_new_tokens=12, num_beams=4))
    mask = (test["inputs"] != 0).astype(np.int32)
    out = np.asarray(gen(result.state.params, test["inputs"], mask))
    exact = np.mean([trim(o, 1) == trim(t, 1) for o, t in zip(out, test["targets"], strict=True)])
    print(f"{cfg.family}: held-out exact match (beam 4) {exact:.4f} on {len(out)} sequences")
    return float(exact)


@pytest.mark.slow
def test_lstm_luong_baseline_learns_reversal_to_99_percent(tmp_path):
    from bert_jax.arch.seq2seq.rnn import RnnConfig, RnnEncoderDecoder

    cfg = RnnConfig(vocab_size=23, embed_dim=32, hidden_size=128)
    assert _train_and_beam_decode(tmp_path, cfg, RnnEncoderDecoder(cfg), 300, 3e-3) >= 0.99


@pytest.mark.slow
def test_transformer_learns_reversal_to_99_percent_with_beam_search(tmp_path):
    from bert_jax.arch.seq2seq import EncoderDecoder, seq2seq_preset

    cfg = seq2seq_preset(
        "transformer-base", vocab_size=23, d_model=64, d_kv=16, d_ff=128, num_layers=2,
        num_decoder_layers=2, num_heads=4, dropout_rate=0.0, max_position=32,
    )  # fmt: skip
    assert (cfg.norm, cfg.position, cfg.label_smoothing) == ("layer_post", "sinusoidal", 0.1)
    assert _train_and_beam_decode(tmp_path, cfg, EncoderDecoder(cfg), 400, 1e-3) >= 0.99
