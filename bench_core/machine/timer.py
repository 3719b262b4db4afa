"""How one call is timed on this machine: CUDA events on a GPU (no host sync between calls), perf_counter on CPU."""
from __future__ import annotations

import time

# What times a step or a call, by device, for the captions that name it.
TIMER_NAMES: dict[str, str] = {"cuda": "CUDA events", "cpu": "time.perf_counter (no GPU: wall-clock on the CPU)"}


def time_calls(torch, fn, cuda: bool, warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        fn()
    if not cuda:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return times
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for start, end in zip(starts, ends, strict=True):
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
