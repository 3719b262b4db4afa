"""Maps of one comparison side by side, from other GPUs or other days: each line's crossover in each sweep, and each
point's speedup in each, as the sweep's own views give them (its crossovers, its best estimate per point). Only
arranged here: a figure is computed where each sweep's own views compute it.

A one-axis sweep's lines share one chart (figures.sweep_line); a map's are lines too, one per value of its second
axis, and two heatmaps side by side on a phone are read cell by cell. So maps are compared as text: the crossing
on each line, then each shared point.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench_core.sweep.crossover import speedup_text
from bench_core.sweep.records import SweepResult, crossovers

NOT_SWEPT = "not swept"
PREDICTED_MARK = "≈"   # as the heatmap marks a predicted cell


def same_map(a: SweepResult, b: SweepResult) -> bool:
    """Two sweeps whose maps can be set side by side: the same two stages along the same axes, in the same order."""
    return (a.spec.comparison.a, a.spec.comparison.b, [x.name for x in a.spec.axes]) == \
        (b.spec.comparison.a, b.spec.comparison.b, [x.name for x in b.spec.axes])


def sweep_name(result: SweepResult) -> str:
    """A sweep's column: where it ran and its id (two sweeps of one GPU differ in the id)."""
    return f"{result.gpu or result.device} ({result.sweep_id[:6]})"


@dataclass(frozen=True)
class SideBySide:
    """Rows of text, one column per sweep: what `first` heads (a line, a point), then each sweep's text."""
    first: str
    sweeps: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]

    def records(self) -> list[dict[str, str]]:
        """Each row as a table's record, headed by `first` and the sweeps' names."""
        return [{self.first: label, **dict(zip(self.sweeps, texts, strict=True))} for label, texts in self.rows]


def _line_text(result: SweepResult, fixed: str) -> str:
    found = [c for c in crossovers(result) if c.fixed == fixed]
    if found:
        return "; ".join(c.text for c in found)
    axes = result.spec.axes
    on_line = [e for p in result.points if (e := result.best_estimate(p))
               and (not fixed or f"{axes[1].name}={p.value(axes[1].name)}" == fixed)]
    if not on_line:
        return NOT_SWEPT
    if len(on_line) < 2:
        return "one point: no line to cross ×1.00"
    side = "above" if all(e[0] > 1 for e in on_line) else "below" if all(e[0] < 1 for e in on_line) else "at"
    return f"no crossing: {side} ×1.00 at every swept {axes[0].name}"


def crossovers_side_by_side(results: Sequence[SweepResult]) -> SideBySide:
    """Each line's crossover in each sweep (a one-axis sweep has one line); the lines of every sweep, in order."""
    axes = results[0].spec.axes
    if len(axes) == 1:
        lines = [""]
    else:
        values = dict.fromkeys(v for r in results for v in r.spec.axes[1].values)
        lines = [f"{axes[1].name}={v}" for v in sorted(values)]
    rows = tuple((line or axes[0].name, tuple(_line_text(r, line) for r in results)) for line in lines)
    return SideBySide("line", tuple(sweep_name(r) for r in results), rows)


def _point_text(result: SweepResult, values: tuple) -> str:
    point = next((p for p in result.points if p.values == values), None)
    est = result.best_estimate(point) if point else None
    if point is None:
        return NOT_SWEPT
    if est is None:
        return "no figure" + (f" ({point.prediction_note})" if point.prediction_note else "")
    return ("" if point.measured else PREDICTED_MARK) + speedup_text(*est) + ("" if point.measured else " predicted")


def speedups_side_by_side(results: Sequence[SweepResult]) -> SideBySide:
    """Each point's speedup (B over A) in each sweep: measured, or predicted (≈) with its shown interval."""
    keys = dict.fromkeys(p.values for r in results for p in r.points)
    rows = tuple((", ".join(f"{k}={v}" for k, v in values), tuple(_point_text(r, values) for r in results))
                 for values in sorted(keys))
    return SideBySide("point", tuple(sweep_name(r) for r in results), rows)
