"""A sweep as the terminal prints it, a line per point, then each line's answer, the prediction's errors and the
notes: the run's own summary (sweep.cli) and a saved sweep's (`sweep show`, sweep.side_cli) alike."""
from __future__ import annotations

from bench_core.results.near_one import times
from bench_core.sweep.crossover import speedup_text
from bench_core.sweep.errors import error_figures
from bench_core.sweep.lines import line_answers
from bench_core.sweep.records import SweepResult


def summary_lines(result: SweepResult) -> list[str]:
    lines = [f"sweep {result.sweep_id}: {result.title} on {result.gpu or result.device} ({result.status.value})"]
    for p in result.points:
        est = result.best_estimate(p)
        pred = p.prediction
        d = result.decimals(p)
        shown = speedup_text(*est, d) if est else p.failure or "no figure"
        said = times(pred.speedup, d) if pred else "-"
        why = result.not_run(p)
        lines.append(f"  {p.label:<32} {shown:<22} {p.source.value if p.source else '-':<9} "
                     f"{p.bound or '-':<12} predicted {said}"
                     + (f", error {p.prediction_error:+.1%}" if p.prediction_error is not None else "")
                     + (f", peak memory {p.measurement.peak_change:+.1%}" if p.measurement and
                        p.measurement.peak_change is not None else "")
                     + (f"; {p.measurement.brief_reason}" if p.measurement and p.measurement.reason else "")
                     + (f"; {why.text}" if why else "")
                     + (f"; not predicted: {p.prediction_note}" if p.prediction_note else ""))
    for text in line_answers(result):
        lines.append(f"  crossover: {text}")
    lines += [f"  {e.label}: {e.text}" for e in error_figures(result)]
    lines += [f"  {n}" for n in result.shown_notes]
    return lines
