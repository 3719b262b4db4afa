"""Why a sweep's points have no peak-memory figure: the memory map shows "–" there, or is not drawn at all, and
the reader is told why rather than left to guess. Worded once for the page and the HTML report."""
from __future__ import annotations

from collections import Counter

from bench_core.results.records import Status
from bench_core.sweep.predict import STEP_PARTS
from bench_core.sweep.records import PointResult, SweepResult


def why_no_memory(result: SweepResult, p: PointResult) -> str:
    """The reason one point has no peak-memory figure (PointResult.memory is None)."""
    if p.measurement is not None and p.measurement.status != Status.OK:
        return f"its run ended without a figure ({p.measurement.status.value})"
    if result.device != "cuda":   # a run end to end reads its process's peak; a CPU's shallow steps have none
        return "on a CPU only a run end to end measures a peak, and this point only has its prediction"
    if p.prediction is None:
        return "it was not predicted"
    steps = [t for t in p.prediction.timings.times if t.part in STEP_PARTS]
    if not any(t.peak_mib > 0 for t in steps):
        return "its prediction holds no peaks (a file from before peaks were predicted)"
    return "a stage's two-block step peaked lower than its one-block step (noise: no peak to extrapolate)"


def memory_gaps(result: SweepResult) -> str | None:
    """One sentence: how many points have no peak-memory figure and why, grouped by reason; None where all have."""
    missing = [p for p in result.points if p.memory is None]
    if not missing:
        return None
    reasons = Counter(why_no_memory(result, p) for p in missing)
    n = len(result.points)
    head = "no point has a peak-memory figure" if len(missing) == n else \
        f"{len(missing)} of {n} points have no peak-memory figure"
    if len(reasons) == 1:
        return f"{head}: {next(iter(reasons))}"
    return f"{head}: " + "; ".join(f"{count} because {reason}" for reason, count in reasons.items())
