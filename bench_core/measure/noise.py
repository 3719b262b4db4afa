"""Noise with its cause: a stage's GPU and host figures during its timed steps (from machine.conditions), and
the flags derived from them. Each bound follows from what its figure measures, never from a results file.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bench_core.machine.conditions import Conditions
from bench_core.measure.stats import NOISE_SPREAD

# The worker's own runnable threads while it times: the Python loop that launches the step. CUDA waits spin on
# the CPU (cudaDeviceScheduleAuto spins while the host has more cores than active contexts), so that thread is
# runnable throughout; the sampler's thread sleeps between samples, torch's intra-op pool idles on a GPU step.
LAUNCH_THREADS = 1


class Cause(StrEnum):
    THROTTLED = "throttled"
    SHARED = "shared"
    HOST_BUSY = "host busy"


@dataclass(frozen=True)
class NoiseCause:
    cause: Cause
    detail: str          # the figures that broke the rule

    @property
    def text(self) -> str:
        return f"{self.cause} ({self.detail})"


@dataclass(frozen=True)
class StageConditions:
    """A stage's figures over the timed steps of all its processes (one per file field)."""
    sm_clock_mhz_min: int | None = None
    sm_clock_mhz_median: float | None = None
    throttle_reasons: tuple[str, ...] = ()
    power_w_median: float | None = None
    temp_c_max: float | None = None
    gpu_other_processes: int | None = None
    host_load_avg: float | None = None
    host_cores: int | None = None
    worker_cpu_share: float | None = None
    clocks_locked: str = ""          # machine.conditions.ClocksLocked's value; "" where not recorded

    @classmethod
    def of(cls, c: Conditions) -> StageConditions:
        return cls(sm_clock_mhz_min=min(c.sm_clock_mhz) if c.sm_clock_mhz else None,
                   sm_clock_mhz_median=statistics.median(c.sm_clock_mhz) if c.sm_clock_mhz else None,
                   throttle_reasons=c.throttle_reasons,
                   power_w_median=statistics.median(c.power_w) if c.power_w else None, temp_c_max=c.temp_c_max,
                   gpu_other_processes=c.other_processes, host_load_avg=c.load_avg, host_cores=c.host_cores,
                   worker_cpu_share=c.cpu_share, clocks_locked=c.clocks_locked.value)

    @classmethod
    def imported(cls, metrics: dict[str, Any]) -> StageConditions | None:
        """From a CSV row's figures; None for a file older than these fields (or a CPU run's row)."""
        data: dict[str, Any] = {name: metrics.get(name) for name in FILE_FIELDS}
        if all(v in (None, "") for v in data.values()):
            return None
        reasons = tuple(r for r in str(data.pop("throttle_reasons") or "").split(";") if r)
        return cls(**{**data, "clocks_locked": data.get("clocks_locked") or ""}, throttle_reasons=reasons)

    @property
    def reasons_text(self) -> str:
        return ";".join(self.throttle_reasons)

    @property
    def causes(self) -> tuple[NoiseCause, ...]:
        return causes(self)


FILE_FIELDS = ("sm_clock_mhz_min", "sm_clock_mhz_median", "throttle_reasons", "power_w_median", "temp_c_max",
               "gpu_other_processes", "host_load_avg", "host_cores", "worker_cpu_share", "clocks_locked")


def causes(c: StageConditions) -> tuple[NoiseCause, ...]:
    """Why a stage's time may not be its own: each rule broken, with its figures."""
    out = []
    if c.throttle_reasons:  # any clock-event reason but idle and a clock setting: the clocks were held down
        clock = f", SM clock down to {c.sm_clock_mhz_min:,} MHz" if c.sm_clock_mhz_min is not None else ""
        out.append(NoiseCause(Cause.THROTTLED, ", ".join(c.throttle_reasons) + clock))
    if c.gpu_other_processes:  # another process's kernels share the SMs and the memory bandwidth
        n = c.gpu_other_processes
        out.append(NoiseCause(Cause.SHARED, f"{n} other process{'es' if n > 1 else ''} on the GPU"))
    if host_overloaded(c.host_load_avg, c.host_cores):
        out.append(NoiseCause(Cause.HOST_BUSY, f"load {c.host_load_avg:.1f} on {c.host_cores} cores"))
    if worker_starved(c.worker_cpu_share):
        out.append(NoiseCause(Cause.HOST_BUSY, f"the worker had a CPU {c.worker_cpu_share:.0%} of the time"))
    return tuple(out)


def host_overloaded(load: float | None, cores: int | None) -> bool:
    """The load average counts the host's runnable threads, the worker's LAUNCH_THREADS among them, and is the
    whole host's, so it is counted against the whole host's cores. The others leave the launch loop a core while
    (load - LAUNCH_THREADS) <= cores - LAUNCH_THREADS: busy above that, i.e. above one runnable thread per core."""
    if load is None or not cores:
        return False
    return load - LAUNCH_THREADS > cores - LAUNCH_THREADS


def worker_starved(share: float | None) -> bool:
    """A launch loop that spins in its CUDA waits is on a CPU the whole timed loop (share ~1, a little over with
    the sampler's thread); what is missing is time the scheduler gave its core to another thread. Off a CPU for
    more than NOISE_SPREAD of the time, a launch-bound step could move by more than the noise rule allows."""
    return share is not None and share < 1 - NOISE_SPREAD
