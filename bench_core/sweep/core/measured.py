"""What a sweep's point measured end to end: stage A then stage B as one two-stage run, B's speedup over A with its
interval, bottleneck, peak memory, kernel and host time; or how the run ended without a figure."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from bench_core.results.records import Status

# How a point's end-to-end run ended without a figure, as its cell and line say it (the reason is kept whole)
FAILURE_WORDS = {Status.OOM: "ran out of memory", Status.FAILED: "failed", Status.UNAVAILABLE: "could not run here",
                 Status.TIMEOUT: "timed out", Status.INTERRUPTED: "was interrupted"}
BRIEF_REASON = 240   # characters of a point's reason on its one line (PointMeasurement.brief_reason)


def peak_change(a_mib: float | None, b_mib: float | None) -> float | None:
    """B's peak memory against A's, -0.297 for 29.7% less; None without both."""
    return None if not a_mib or b_mib is None else b_mib / a_mib - 1


@dataclass(frozen=True)
class PointMeasurement:
    status: Status                  # ok, or why there is no figure (failed, unavailable, oom, cancelled...)
    reason: str | None = None
    speedup: float | None = None
    low: float | None = None
    high: float | None = None
    interval_text: str | None = None   # what the interval covers ("across 3 processes", "within one process")
    a_ms: float | None = None
    b_ms: float | None = None
    bound: str | None = None        # B's measured bottleneck
    a_peak_mib: float | None = None
    b_peak_mib: float | None = None
    wall_s: float | None = None     # what the point cost end to end (the planner's cost estimate)
    a_kernel_ms: float | None = None   # each stage's kernel time a step, from its profiled steps (CUDA)
    b_kernel_ms: float | None = None
    a_host_ms: float | None = None     # each stage's host time to issue a step, median of its timed steps (CUDA;
    b_host_ms: float | None = None     # where the GPU sets the pace this includes waiting on a full launch queue)

    @property
    def peak_change(self) -> float | None:
        """B's peak memory against A's, -0.297 for 29.7% less."""
        return peak_change(self.a_peak_mib, self.b_peak_mib)

    @property
    def brief_reason(self) -> str | None:
        """The reason in whole sentences up to BRIEF_REASON characters, for a line per point: a CUDA out-of-memory
        message runs to about 800 with the allocator's advice; its first sentences say what
        was asked and what was free. The files keep the whole reason."""
        if not self.reason or len(self.reason) <= BRIEF_REASON:
            return self.reason
        kept = ""
        for sentence in re.split(r"(?<=\.) ", self.reason):
            if len(kept) + len(sentence) + 1 > BRIEF_REASON:
                break
            kept = f"{kept} {sentence}" if kept else sentence
        return (kept or self.reason[:BRIEF_REASON]) + " …"

    @property
    def failure(self) -> str | None:
        """What ended the end-to-end run without a figure ("ran out of memory"; the reason names the stage); None
        where it gave one."""
        if self.status == Status.OK:
            return None
        return FAILURE_WORDS.get(self.status, self.status.value)

    def to_dict(self) -> dict:
        return {**asdict(self), "status": self.status.value}

    @classmethod
    def from_dict(cls, data: dict) -> PointMeasurement:
        return cls(**{**data, "status": Status(data["status"])})
