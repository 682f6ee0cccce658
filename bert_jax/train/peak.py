"""MFU's denominator over a run. On TPU and a listed GPU it is the chip's published bf16 peak
(fixed). On CPU there is no such table, so it is the best FLOP/s seen on this machine: a float32
matmul probe at start, probed again at most every `reprobe_seconds` as the run logs, and the
training step's own FLOP/s whenever that beats the probes. A busy moment at start-up therefore
cannot make MFU exceed 100%; the log line says which denominator it is."""

from __future__ import annotations

import time
from collections.abc import Callable

import jax

from bert_jax.train import flops as flops_lib


class PeakTracker:
    def __init__(
        self,
        devices: list[jax.Device],
        reprobe_seconds: float = 60.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.peak, self._label = flops_lib.peak_flops(devices)
        self.measured = not self._label.endswith("bf16 peak")  # not the chip table's
        self.probes = 1
        self.step_beat_probes = False
        self._reprobe, self._clock = reprobe_seconds, clock
        self._last_probe = clock()

    def update(self, achieved_flops: float) -> float:
        """The peak to divide `achieved_flops` (the step's FLOP/s) by; never below it."""
        if not self.measured:
            return self.peak
        if self._clock() - self._last_probe >= self._reprobe:
            probe = flops_lib.measured_matmul_peak(jax.local_devices()[0], fresh=True)
            self.peak, self.probes = max(self.peak, probe), self.probes + 1
            self._last_probe = self._clock()
        if achieved_flops > self.peak:
            self.peak, self.step_beat_probes = achieved_flops, True
        return self.peak

    def describe(self) -> str:
        if not self.measured:
            return f"{self._label} {self.peak / 1e12:.3f} TFLOP/s"
        return (
            f"the best FLOP/s seen on this machine: {self._label} {self.peak / 1e12:.3f} TFLOP/s "
            f"at start, re-probed every {self._reprobe:g} s, or the step's own if higher"
        )
