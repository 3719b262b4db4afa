"""Maps of one comparison side by side, from other GPUs or other days: each line's crossover in each sweep, each
point's speedup in each, and where their intervals lie apart, as the sweep's own views give them (its crossovers,
its best estimate per point). Only arranged here: a figure is computed where each sweep's own views compute it.

A one-axis sweep's lines share one chart (figures.sweep_line); a map's are lines too, one per value of its second
axis, and two heatmaps side by side on a phone are read cell by cell. So maps are compared as text: the crossing
on each line, then each shared point, the points whose intervals lie apart named first (two runs of the Apex map
on one H200 read x1.005 (1.005-1.006) and x0.79 (0.65-0.97) at one point, and the table did not say so).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench_core.sweep.core.crossover import speedup_text
from bench_core.sweep.core.line_answers import NOT_SWEPT, line_answer
from bench_core.sweep.core.records import PointResult, SweepResult, crossovers
from bench_core.sweep.views.rows import PREDICTED_MARK


def same_map(a: SweepResult, b: SweepResult) -> bool:
    """Two sweeps whose maps can be set side by side: the same two stages along the same axes, in the same order."""
    return (a.spec.comparison.a, a.spec.comparison.b, [x.name for x in a.spec.axes]) == \
        (b.spec.comparison.a, b.spec.comparison.b, [x.name for x in b.spec.axes])


def sweep_name(result: SweepResult) -> str:
    """A sweep as a column or a legend names it: where and when (UTC, month-day hour:minute) it ran, and its id
    (two runs of one GPU on one day differ in the time; an import of one sweep, in the id)."""
    return f"{result.gpu or result.device} {result.created_at[5:16].replace('T', ' ')} ({result.sweep_id[:6]})"


@dataclass(frozen=True)
class SideBySide:
    """Rows of text: what `first` heads (a line, a point), then a text under each of `columns` (one per sweep,
    after any column about them all)."""
    first: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]

    def records(self) -> list[dict[str, str]]:
        """Each row as a table's record, headed by `first` and `columns`."""
        return [{self.first: label, **dict(zip(self.columns, texts, strict=True))} for label, texts in self.rows]


def crossovers_side_by_side(results: Sequence[SweepResult]) -> SideBySide:
    """Each line's crossover in each sweep, the lines of every sweep in order: "along width" for a one-axis sweep,
    "at batch_size=4" for each line of a map."""
    axes = results[0].spec.axes
    if len(axes) == 1:
        lines: list[tuple[str, tuple[str, int] | None]] = [(f"along {axes[0].name}", None)]
    else:
        values = sorted(dict.fromkeys(v for r in results for v in r.spec.axes[1].values))
        lines = [(f"at {axes[1].name}={v}", (axes[1].name, v)) for v in values]
    found = [crossovers(r) for r in results]   # each sweep's, once: a line picks its own
    rows = tuple((label, tuple(line_answer(r, f, fixed) for r, f in zip(results, found, strict=True)))
                 for label, fixed in lines)
    return SideBySide("line", tuple(sweep_name(r) for r in results), rows)


def _estimate(result: SweepResult, values: tuple) -> tuple[PointResult | None, tuple[float, float, float] | None]:
    point = next((p for p in result.points if p.values == values), None)
    return point, result.best_estimate(point) if point else None


def _point_text(result: SweepResult, point: PointResult | None, est: tuple[float, float, float] | None) -> str:
    if point is None:
        return NOT_SWEPT
    if est is None:
        return "no figure" + (f" ({point.prediction_note})" if point.prediction_note else "")
    said = speedup_text(*est, result.decimals(point))
    return said if point.measured else f"{PREDICTED_MARK}{said} predicted"


def _apart(estimates: list[tuple[float, float, float]]) -> bool:
    """Some two intervals do not overlap: the sweeps disagree beyond their own uncertainty."""
    return max(e[1] for e in estimates) > min(e[2] for e in estimates)


APART, UNPAIRED = "no: apart", "–"   # a point's overlap column: its intervals apart; a figure in one sweep only


def _agreement(estimates: list[tuple[float, float, float]]) -> str:
    if len(estimates) < 2:
        return UNPAIRED
    return APART if _apart(estimates) else "yes"


OVERLAP = "intervals overlap"


def speedups_side_by_side(results: Sequence[SweepResult]) -> SideBySide:
    """Each point's speedup (B over A) in each sweep, measured or predicted (≈, its shown interval), after whether
    their intervals overlap; the points where they lie apart first, then in the axes' order."""
    keys = sorted(dict.fromkeys(p.values for r in results for p in r.points))
    rows = []
    for values in keys:
        found = [_estimate(r, values) for r in results]
        estimates = [e for _, e in found if e]
        texts = (_point_text(r, p, e) for r, (p, e) in zip(results, found, strict=True))
        rows.append((", ".join(str(v) for _, v in values), (_agreement(estimates), *texts)))
    rows.sort(key=lambda row: row[1][0] != APART)   # stable: the axes' order kept within each group
    names = ", ".join(a.name for a in results[0].spec.axes)
    return SideBySide(names, (OVERLAP, *(sweep_name(r) for r in results)), tuple(rows))


def apart_count(points: SideBySide) -> tuple[int, int]:
    """From `speedups_side_by_side`'s table: (points whose intervals lie apart, points with a figure in at least two
    sweeps), read from its overlap column."""
    said = [texts[0] for _, texts in points.rows]
    return said.count(APART), sum(t != UNPAIRED for t in said)
