"""Noise with its cause: a stage's GPU and host figures during its timed steps (from machine.conditions), and
the flags derived from them; and each process's own timed steps, which show whether it was still warming up when
timing began. Each bound follows from what its figure measures, never from a results file.
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bench_core.machine.conditions import Conditions
from bench_core.measure.stats import NOISE_SPREAD, quantile

# The worker's own runnable threads while it times: the Python loop that launches the step. CUDA waits spin on
# the CPU (cudaDeviceScheduleAuto spins while the host has more cores than active contexts), so that thread is
# runnable throughout; the sampler's thread sleeps between samples, torch's intra-op pool idles on a GPU step.
LAUNCH_THREADS = 1


class Cause(StrEnum):
    THROTTLED = "throttled"
    SHARED = "shared"
    HOST_BUSY = "host busy"
    WARMING_UP = "warming up"


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


# Leading timed steps of one process that must ALL be slower than that process's own p90 to say it was still
# warming up when timing began. In a settled process its steps are exchangeable: the ranks of its first K steps
# are a random K-subset of its n, so all K lie among the m steps above the p90 with probability
# C(m, K) / C(n, K), about 0.1**K (m is about n/10; at most 0.1**K for the p90 of stats.quantile, which
# tests/bench_core/test_warming.py checks for every n). K = 3: 0.1% a process, so a run of 21 processes
# (7 stages x 3) is flagged falsely about once in 50 runs (1 - 0.999**21 = 2%). K = 2 would be 1% a process,
# a false flag in one run of five. And the first timed step is systematically a little slower (it starts on an
# empty GPU queue, the steps after it queue behind the one before): alone it never makes K >= 2 in a row.
WARMING_RUN = 3
WARMING_CHANCE = 0.1 ** WARMING_RUN     # the bound above: a settled process flagged by chance


def least_judged_steps(run: int = WARMING_RUN) -> int:
    """The fewest timed steps of which `run` can lie above their own p90: fewer is no verdict. With fewer, the
    p90 (stats.quantile: linear between ranks) is at or above the `run`-th slowest step, one of the first `run`
    themselves, so the rule could never fire: a "settled" from it would say nothing. For 3: 22 steps (at least
    2 x 3 in any case). Found from stats.quantile itself, so it follows the one p90 rule."""
    n = 2 * run
    while _above_p90(range(n)) < run:
        n += 1
    return n


def _above_p90(steps: Sequence[float]) -> int:
    p90 = quantile(steps, 0.9)
    return sum(ms > p90 for ms in steps)


@dataclass(frozen=True)
class Warming:
    """Which of a stage's processes were still warming up when their timed steps began."""
    judged: int = 0                      # processes with enough timed steps for a verdict
    warming: tuple[int, ...] = ()        # those still warming up, numbered from 1 in the stage's round order

    @property
    def count(self) -> int | None:
        """Processes flagged; None where none could be judged (not "0 warming")."""
        return len(self.warming) if self.judged else None

    @property
    def cause(self) -> NoiseCause | None:
        if not self.warming:
            return None
        first = f"first {WARMING_RUN} timed steps were all slower than"
        chance = f"{WARMING_CHANCE:.1%} by chance"
        if len(self.warming) == 1:
            return NoiseCause(Cause.WARMING_UP, f"process {self.warming[0]}'s {first} its own p90, {chance}")
        names = ", ".join(map(str, self.warming[:-1])) + f" and {self.warming[-1]}"
        return NoiseCause(Cause.WARMING_UP, f"processes {names}: each one's {first} its own p90, {chance} each")


def warming(rounds: Sequence[Sequence[float]]) -> Warming:
    """Each process's (round's) timed steps, in order: still warming up when its first WARMING_RUN steps are all
    slower than its own p90; no verdict with fewer than least_judged_steps() steps."""
    least = least_judged_steps()
    judged = [(i, r) for i, r in enumerate(rounds, 1) if len(r) >= least]
    return Warming(len(judged), tuple(i for i, r in judged if _slow_start(r)))


def _slow_start(steps: Sequence[float]) -> bool:
    p90 = quantile(steps, 0.9)
    return all(ms > p90 for ms in steps[:WARMING_RUN])
