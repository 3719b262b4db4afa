"""Why a sweep's points have no peak-memory figure: the memory map shows "–" there, or is not drawn at all, and
the reader is told why rather than left to guess. Worded once for the page and the HTML report, of one point or of
several ("it was predicted only" / "they were predicted only": the sentence had said "5 of 9 points ...: its
prediction holds no peaks")."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from bench_core.results.records import Status
from bench_core.sweep.records import PointResult, SweepResult
from bench_core.sweep.timings import STEP_PARTS


@dataclass(frozen=True)
class Gap:
    """Why points have no peak-memory figure, said of one point (`one`) and of several (`many`)."""
    one: str
    many: str

    def of(self, count: int) -> str:
        return self.one if count == 1 else self.many


def why_no_memory(result: SweepResult, p: PointResult) -> Gap:
    """The reason one point has no peak-memory figure (PointResult.memory is None)."""
    if p.measurement is not None and p.measurement.status != Status.OK:
        status = p.measurement.status.value
        return Gap(f"its run end to end ended without a figure ({status})",
                   f"their runs end to end ended without a figure ({status})")
    if p.prediction is None:
        return Gap("it was not predicted", "they were not predicted")
    if result.device != "cuda":   # a run end to end reads its process's peak; a CPU's shallow steps have none
        on_cpu = "on a CPU a prediction holds no peak memory (only a run end to end measures one)"
        return Gap(f"it was predicted only, and {on_cpu}", f"they were predicted only, and {on_cpu}")
    steps = [t for t in p.prediction.timings.times if t.part in STEP_PARTS]
    if not any(t.peak_mib > 0 for t in steps):
        old = "the sweep's file is from before peaks were predicted"
        return Gap(f"its prediction holds no peak memory ({old})", f"their predictions hold no peak memory ({old})")
    noise = "a stage's two-block step peaked lower than its one-block step, leaving no rise to extrapolate"
    return Gap(f"its predicted peaks are noise: {noise}", f"their predicted peaks are noise: in each, {noise}")


def _head(missing: int, points: int) -> str:
    if missing < points:
        return f"{missing} of {points} points {'has' if missing == 1 else 'have'} no peak-memory figure"
    return "the one point has no peak-memory figure" if points == 1 else \
        f"none of the {points} points has a peak-memory figure"


def memory_gaps(result: SweepResult) -> str | None:
    """One sentence without its full stop: how many points have no peak-memory figure and why, grouped by reason
    ("3 because ...; 2 because ..."); None where all have one."""
    missing = [p for p in result.points if p.memory is None]
    if not missing:
        return None
    reasons = Counter(why_no_memory(result, p) for p in missing)
    head = _head(len(missing), len(result.points))
    if len(reasons) == 1:
        return f"{head}: {next(iter(reasons)).of(len(missing))}"
    return f"{head}: " + "; ".join(f"{count} because {gap.of(count)}" for gap, count in reasons.items())
