"""Where a step's time goes at each point of a sweep timed with its breakdown (`--breakdown`): each part of a block
timed alone, stage A's variant beside stage B's, per step (a call's time times the part's calls in a step). Read by
the Sweep page and the HTML report; computed here once.

A part timed alone is issued by its own Python: where its kernels are quicker than its host, its time is the
host's (an Apex FusedLayerNorm under autocast read 1.32 ms a call on the H200 against 0.03 ms of kernels).
So a row says how the part runs alone, not its share of the step; the prediction is made of whole steps instead
(sweep.core.predict).
"""
from __future__ import annotations

from dataclasses import dataclass

from bench_core.sweep.core.records import PointResult, SweepResult
from bench_core.sweep.timing.timings import KernelTime, Part
from bench_core.sweep.timing.variants import breakdown_parts

BREAKDOWN_TITLE = "Each part of a block timed alone, A beside B"
BREAKDOWN_CAPTION = ("Per step: a call's time times the part's calls in a step, for the parts where B runs another "
                     "variant than A (a part both run alike is timed once, so it shows no difference). A part timed "
                     "alone is issued by its own Python: where its kernels (the kernels columns) are quicker than "
                     "its host, its time is the host's, so a row says how the part runs alone, not its share of "
                     "the step. The prediction is made of whole steps instead.")


@dataclass(frozen=True)
class PartRow:
    point: str                 # the point's axis values
    part: Part
    a_variant: str
    a_ms: float | None         # per step; None: not timed (it could not run here)
    b_variant: str
    b_ms: float | None
    a_kernel_ms: float | None  # the kernels' share of a_ms, from the trace (CUDA); None: not traced
    b_kernel_ms: float | None

    @property
    def change_ms(self) -> float | None:
        """B's time in the part less A's, per step."""
        return None if self.a_ms is None or self.b_ms is None else self.b_ms - self.a_ms

    def shown(self) -> dict:
        """The answer first (a phone shows the first columns): the difference, then each side, then the names; in
        ms to two decimals, and headed "alone" (a norm's 22.45 ms a step, host time, read as its cost in the step)."""
        ms = {"B - A ms/step alone": self.change_ms, "A ms/step alone": self.a_ms, "B ms/step alone": self.b_ms,
              "A kernels ms/step": self.a_kernel_ms, "B kernels ms/step": self.b_kernel_ms}
        return {"point": self.point, "part": self.part.value,
                **{k: None if v is None else round(v, 2) for k, v in ms.items()}, "A": self.a_variant,
                "B": self.b_variant}


def _per_step(t: KernelTime | None) -> tuple[float | None, float | None]:
    if t is None:
        return None, None
    return t.ms * t.calls, (t.kernel_ms * t.calls if t.kernel_ms is not None else None)


def point_rows(result: SweepResult, point: PointResult) -> list[PartRow]:
    """The point's breakdown, A beside B, for the parts where B runs another variant (one both share was timed once:
    its row could only read 0); empty where it was not timed."""
    if point.prediction is None:
        return []
    timings = point.prediction.timings
    a, b = result.spec.comparison.in_family(result.spec.base.family)
    rows = []
    for (part, a_name), (_, b_name) in zip(breakdown_parts(a), breakdown_parts(b), strict=True):
        if a_name == b_name:
            continue
        a_ms, a_kernel = _per_step(timings.find(part, a_name))
        b_ms, b_kernel = _per_step(timings.find(part, b_name))
        if a_ms is None and b_ms is None:
            continue
        rows.append(PartRow(point.label, part, a_name, a_ms, b_name, b_ms, a_kernel, b_kernel))
    return rows


def breakdown_rows(result: SweepResult) -> list[PartRow]:
    return [row for p in result.points for row in point_rows(result, p)]
