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


HOST_CALLS = 3   # calls per host-timing round: few enough that the launch queue (about a thousand launches) never
# fills, so the host is never made to wait for the GPU inside the round
HOST_ROUNDS = 5


def host_rounds_ms(torch, fn, calls: int = HOST_CALLS, rounds: int = HOST_ROUNDS) -> list[float]:
    """The host's time to issue one call on a GPU, the GPU not waited for, in each of `rounds` rounds of `calls`
    back-to-back calls, each round starting on an idle GPU (a sync before it, none inside it)."""
    per_call = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t0) * 1e3 / calls)
    torch.cuda.synchronize()
    return per_call
