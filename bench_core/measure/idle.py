"""Why the GPU sat idle within the profiled steps: waiting for the host to launch the next kernel, or for
something else (a synchronisation, an event from another stream, a copy). Pure: no torch.

The rule is Holistic Trace Analysis's idle-time breakdown (`holistictraceanalysis`,
`BreakdownAnalysis._analyze_idle_time_for_stream`): a gap before activity B is
* host wait   when B's runtime call (cudaLaunchKernel, cudaMemcpyAsync, cudaGraphLaunch, ... with B's correlation
              id) started after the previous activity ended: the GPU had nothing queued because the host had not
              yet asked; the whole gap counts;
* kernel wait when it is not host wait and shorter than KERNEL_WAIT_US (HTA's `consecutive_kernel_delay`);
* other       otherwise (B was queued in time but waited: an event, a copy, a sync).
An activity with no runtime call in the trace is never host wait (HTA: no `ts_runtime`).

One difference, for a share of the step: HTA judges each stream alone and sums a stream's gaps even while another
stream runs. Here only the time the whole GPU is idle counts (the complement of all streams' activities within the
span), each idle interval judged by HTA's rule against the activity that ends it and the GPU's last end before it.
On one stream the two are the same (tests/bench_core/measure/test_idle.py checks HTA's own numbers on a saved trace).
HTA also rounds float timestamps to whole microseconds first; this works on the raw values.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bench_core.measure.trace import Trace

KERNEL_WAIT_US = 30.0   # HTA's default `consecutive_kernel_delay` (trace units: microseconds)
# The resolution of one profiler timestamp. Kineto's trace is written in microseconds and HTA rounds every event
# to whole microseconds before its breakdown; we take one microsecond as what a timestamp resolves. A gap's
# length is a difference of two timestamps, so each gap is known to within one resolution.
TIMESTAMP_RESOLUTION_US = 1.0


@dataclass(frozen=True)
class Activity:
    """One device activity (kernel, memcpy, memset) on a stream, and its CUPTI correlation id."""
    stream: int
    start_us: float
    end_us: float
    correlation: int


@dataclass(frozen=True)
class IdleBreakdown:
    """The profiled steps' span split into busy, host wait, kernel wait and other idle time (all in us, over all
    the profiled steps), with what the bound on host wait needs: the idle gaps and the host wait the timestamps
    cannot order."""
    steps: int
    span_us: float
    busy_us: float
    host_wait_us: float
    kernel_wait_us: float
    other_idle_us: float
    gaps: int               # idle intervals of the whole GPU within the span
    unresolved_us: float    # host wait in gaps whose launch call began within one resolution of the GPU's last end
    unlinked_gaps: int = 0  # gaps whose ending activity has no runtime call in the trace (never host wait)

    @property
    def host_wait_share(self) -> float:
        return self.host_wait_us / self.span_us

    @property
    def other_idle_share(self) -> float:
        """Idle time the host did not cause: HTA's kernel wait and other, together."""
        return (self.kernel_wait_us + self.other_idle_us) / self.span_us

    @property
    def busy_share(self) -> float:
        return self.busy_us / self.span_us

    @property
    def bound_us(self) -> float:
        """The host wait the trace cannot tell from none (see `host_wait_bound_us`)."""
        return host_wait_bound_us(self.gaps, self.unresolved_us)

    @property
    def bound_share(self) -> float:
        return self.bound_us / self.span_us

    @property
    def host_set_pace(self) -> bool:
        """True when the host wait is more than the timestamps' resolution can account for."""
        return self.host_wait_us > self.bound_us

    def timed_host_wait_ms(self, median_ms: float) -> float:
        """Host wait per timed step, at least: the profiler only adds host work, so a profiled step is longer
        than a timed one by at most the host wait it added. What is left of the trace's host wait after taking
        all of that extra length off, the timed steps had too (their GPU work is the same)."""
        profiled_ms, host_ms = self.span_us / self.steps / 1e3, self.host_wait_us / self.steps / 1e3
        return max(0.0, host_ms - max(0.0, profiled_ms - median_ms))

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "span_us": self.span_us, "busy_us": self.busy_us,
                "host_wait_us": self.host_wait_us, "kernel_wait_us": self.kernel_wait_us,
                "other_idle_us": self.other_idle_us, "gaps": self.gaps, "unresolved_us": self.unresolved_us,
                "unlinked_gaps": self.unlinked_gaps}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> IdleBreakdown:
        return cls(steps=int(d["steps"]), span_us=float(d["span_us"]), busy_us=float(d["busy_us"]),
                   host_wait_us=float(d["host_wait_us"]), kernel_wait_us=float(d["kernel_wait_us"]),
                   other_idle_us=float(d["other_idle_us"]), gaps=int(d["gaps"]),
                   unresolved_us=float(d["unresolved_us"]), unlinked_gaps=int(d.get("unlinked_gaps", 0)))


def host_wait_bound_us(gaps: int, unresolved_us: float, resolution_us: float = TIMESTAMP_RESOLUTION_US) -> float:
    """The most host wait that timestamp resolution alone can produce in a span with `gaps` idle gaps:
    * each gap's two edges are known only to one resolution, so up to `resolution_us` of every gap may lie on
      the wrong side of a launch call: gaps x resolution;
    * a gap whose launch call began within one resolution of the GPU's last end may not be host wait at all
      (the order of the two events is not resolved), so all of its length: `unresolved_us`.
    Host wait above the sum is host wait however the timestamps were rounded. Derived from the resolution and
    the trace itself, never from results."""
    return gaps * resolution_us + unresolved_us


def _busy_intervals(activities: list[Activity]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for a in sorted(activities, key=lambda a: a.start_us):
        end = max(a.start_us, a.end_us)
        if merged and a.start_us <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([a.start_us, end])
    return [(s, e) for s, e in merged]


def attribute(activities: Iterable[Activity], launches: Mapping[int, float], steps: int,
              resolution_us: float = TIMESTAMP_RESOLUTION_US) -> IdleBreakdown | None:
    """The idle breakdown of `steps` profiled steps. `launches`: CUPTI correlation id -> start (us) of the
    runtime call that enqueued that activity. None when there is no activity (nothing to attribute)."""
    acts = list(activities)
    if not acts:
        return None
    busy = _busy_intervals(acts)
    starting: dict[float, list[Activity]] = {}
    for a in acts:
        starting.setdefault(a.start_us, []).append(a)
    host = kernel = other = unresolved = 0.0
    unlinked = 0
    for (_, last_end), (next_start, _) in zip(busy, busy[1:], strict=False):
        gap = next_start - last_end
        calls = [launches[a.correlation] for a in starting[next_start] if a.correlation in launches]
        if len(calls) < len(starting[next_start]):
            unlinked += 1
        # several activities starting together: the GPU waited for the host only if every one was launched late
        call = min(calls) if calls and len(calls) == len(starting[next_start]) else None
        if call is not None and call > last_end:
            host += gap
            if call - last_end <= resolution_us:
                unresolved += gap
        elif gap < KERNEL_WAIT_US:
            kernel += gap
        else:
            other += gap
    span = busy[-1][1] - busy[0][0]
    busy_us = sum(e - s for s, e in busy)
    if span <= 0:
        return None
    return IdleBreakdown(max(1, int(steps)), span, busy_us, host, kernel, other, len(busy) - 1, unresolved,
                         unlinked)


def inputs(trace: Trace) -> tuple[list[Activity], dict[int, float]]:
    """A trace's device activities and the start of each runtime call by correlation id (us), for `attribute`."""
    activities = [Activity(a.stream, a.start_ns / 1e3, (a.start_ns + a.dur_ns) / 1e3, a.correlation)
                  for a in trace.activities]
    return activities, {corr: start / 1e3 for corr, start in trace.launches.items()}


def idle_of(trace: Trace, steps: int) -> IdleBreakdown | None:
    """The idle breakdown of a trace's `steps` steps; None without runtime calls (nothing to tie a gap to)."""
    if not trace.launches:
        return None
    return attribute(*inputs(trace), steps)
