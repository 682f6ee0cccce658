"""MFU on CPU cannot exceed 100%: the denominator is the best FLOP/s seen on this machine (matmul
probes spread over the run, or the step itself when it beats them), and the log says so."""

from __future__ import annotations

import jax

from bert_jax.train.peak import PeakTracker


def test_a_busy_start_up_probe_is_replaced_by_later_ones():
    t = [0.0]
    tracker = PeakTracker(jax.local_devices()[:1], reprobe_seconds=60.0, clock=lambda: t[0])
    assert tracker.measured and tracker.peak > 1e9  # a real float32 matmul probe
    idle = tracker.peak
    tracker.peak = idle / 100  # as if start-up had shared the cores with a busy neighbour
    t[0] = 30.0
    assert tracker.update(0.0) == idle / 100  # not yet time to probe again
    t[0] = 61.0
    assert tracker.update(0.0) > idle / 10 and tracker.probes == 2  # a real second probe
    # the step itself beating every probe becomes the peak: MFU 1.0 at most
    fast = tracker.peak * 3
    assert fast / tracker.update(fast) == 1.0 and tracker.step_beat_probes
    text = tracker.describe()
    assert "best FLOP/s seen" in text and "re-probed every 60 s" in text


def test_tokens_per_step_of_a_tagger_over_precomputed_features():
    """Was 1 token per sequence: with no input_ids, the count fell back to the batch size, so a
    feature-based tagger's tokens/s were its sequences/s."""
    from types import SimpleNamespace

    from bert_jax.tasks.feature_ner import FeatureTaggingTask
    from bert_jax.train.loop import _tokens_per_step

    task = FeatureTaggingTask(512, 9, 32, 64, 128)
    assert _tokens_per_step(SimpleNamespace(task=task)) == 32 * 64
