"""Each line of a sweep's map, answered in words: its crossings of ×1.00 (`records.crossovers`), or the side of ×1.00
it keeps at every swept value. The sweep's answer, computed here once: the history stores it for the History list,
and the CLI, the page, the report and the side-by-side compare read it."""
from __future__ import annotations

from bench_core.sweep.core.crossover import Crossover, Estimate, Verdict
from bench_core.sweep.core.records import SweepResult, crossovers

NOT_SWEPT = "not swept"


def line_answer(result: SweepResult, found: list[Crossover], fixed: tuple[str, int] | None) -> str:
    """One line's answer (the whole sweep's line where `fixed` is None, else the one at that value of the second
    axis): its crossings, or the side of ×1.00 it keeps at every swept value, from `found` (`crossovers`)."""
    said = "" if fixed is None else f"{fixed[0]}={fixed[1]}"
    on_line = [c for c in found if c.fixed == said]
    if on_line:
        return "; ".join(c.text for c in on_line)
    axis = result.spec.axes[0].name
    estimates = [Estimate(p.value(axis), *e) for p in result.points if fixed is None or p.value(fixed[0]) == fixed[1]
                 if (e := result.best_estimate(p))]
    if not estimates:
        return NOT_SWEPT
    if len(estimates) < 2:
        return "one point: no line to cross ×1.00"
    # a side of ×1.00 is claimed only where every point's interval lies on it: "above ×1.00 at every swept width"
    # beside ×0.77–1.92 at one of them contradicted itself
    verdicts = {e.verdict for e in estimates}
    if verdicts == {Verdict.PAYS}:
        return f"no crossing: above ×1.00 at every swept {axis}"
    if verdicts == {Verdict.COSTS}:
        return f"no crossing: below ×1.00 at every swept {axis}"
    by = {v: [e.x for e in sorted(estimates, key=lambda e: e.x) if e.verdict == v] for v in Verdict if v in verdicts}
    return "no crossing measured: " + "; ".join(
        f"{v.value} at {axis}={', '.join(f'{x:,.0f}' for x in xs)}" for v, xs in by.items())


def line_answers(result: SweepResult) -> list[str]:
    """Every line's answer, each naming its line: a map's lines that never cross ×1.00 say on which side they stay
    (the page said "no crossover of ×1.00 inside the swept values", for a lever that always paid and for FLCE's,
    which paid at batch 16 and never at batch 4 or 8, alike: a new user's pass)."""
    axes, found = result.spec.axes, crossovers(result)
    if not axes:
        return []
    lines: list[tuple[str, int] | None] = [None] if len(axes) == 1 else [(axes[1].name, v) for v in axes[1].values]
    out = []
    for fixed in lines:
        text = line_answer(result, found, fixed)
        if fixed is not None and not any(c.fixed == f"{fixed[0]}={fixed[1]}" for c in found):
            text = f"{text}, at {fixed[0]}={fixed[1]}"
        out.append(text)
    return out
