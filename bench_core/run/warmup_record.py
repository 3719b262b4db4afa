"""The worker's record of its warm-up (measure.warmup.WarmupTrace): each loop step timed as the timed steps are
(CUDA events on CUDA, perf_counter on CPU) with its start, and the SM clock over the warm-up from a second
machine.conditions sampler, stopped before the timed steps' own sampler starts. Runs inside the worker only.
"""
from __future__ import annotations

import time
from typing import Any

from bench_core.machine.conditions import ConditionsSampler
from bench_core.measure.warmup import WarmupTrace

# Decimals kept: 0.1 us of a step time (CUDA events resolve about 0.5 us), 10 us of a start or sample time.
MS_DECIMALS = 4
S_DECIMALS = 5


class WarmupRecorder:
    """`start` at the warm-up's start, `begin`/`end` around each step's call (`end` before the host's sync),
    `trace` once the warm-up is over."""

    def __init__(self, cuda: bool, torch: Any):
        self.cuda, self.torch = cuda, torch
        # NVML's init here, before the warm-up's clock starts
        self._sampler = ConditionsSampler(torch.cuda.current_device()) if cuda else None
        self._t0 = 0.0
        self._starts: list[float] = []
        self._ms: list[float] = []          # CPU: known at `end`
        self._events: list[tuple[Any, Any]] = []   # CUDA: read at `trace`, once every step has synced

    def start(self, t0: float) -> None:
        self._t0 = t0
        if self._sampler is not None:
            self._sampler.start()

    def begin(self) -> None:
        self._starts.append(time.perf_counter() - self._t0)
        if self.cuda:
            start = self.torch.cuda.Event(enable_timing=True)
            start.record()
            self._events.append((start, None))

    def end(self) -> None:
        if self.cuda:
            end = self.torch.cuda.Event(enable_timing=True)
            end.record()
            self._events[-1] = (self._events[-1][0], end)
        else:
            self._ms.append((time.perf_counter() - self._t0 - self._starts[-1]) * 1e3)

    def trace(self, steps: int, seconds: float) -> WarmupTrace:
        clocks: tuple[tuple[float, int], ...] = ()
        if self._sampler is not None:
            self._sampler.stop()
            clocks = self._sampler.clock_samples
        ms = [a.elapsed_time(b) for a, b in self._events] if self.cuda else self._ms
        return WarmupTrace(steps=steps, seconds=seconds, step_ms=tuple(round(v, MS_DECIMALS) for v in ms),
                           step_start_s=tuple(round(v, S_DECIMALS) for v in self._starts),
                           clock_mhz=tuple(mhz for _, mhz in clocks),
                           clock_s=tuple(round(at - self._t0, S_DECIMALS) for at, _ in clocks))
