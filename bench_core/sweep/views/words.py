"""A sweep in words, said once for the CLI, the page and the HTML report: the sweep as the terminal prints it
(each line's answer from core.line_answers); why points have no peak-memory figure; and the warning where a
comparison's two sides run the same code on this device (the lever registry's rule, levers.same_code: a sweep
between them maps only noise; torch-free, so the page and the CLI say it before a sweep starts)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from bench_core.levers.lever_types import Lever
from bench_core.levers.same_code import proofs_here, same_here
from bench_core.results.near_one import times
from bench_core.results.records import Status
from bench_core.sweep.core.crossover import speedup_text
from bench_core.sweep.core.errors import error_figures
from bench_core.sweep.core.line_answers import line_answers
from bench_core.sweep.core.records import PointResult, SweepResult
from bench_core.sweep.core.spec import Comparison
from bench_core.sweep.timing.timings import STEP_PARTS


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


def _what_runs(a: Lever, b: Lever, device: str) -> str:
    """What both run here: the lever whose every proof holds on this device is itself here (adam-loop)."""
    plain = [lv for lv in (a, b) if proofs_here(lv, device) == frozenset(p.kernel.key for p in lv.expects)]
    return plain[0].title if len(plain) == 1 else "code"


def _apart_elsewhere(levers: Sequence[Lever], device: str) -> tuple[str, str]:
    """The kernels that tell the levers apart on other devices, as code, and those devices: ("`aten::_foreach_*`",
    "CUDA")."""
    elsewhere = [p for lv in levers for p in lv.expects if p.on not in (None, device)]
    return (", ".join(dict.fromkeys(f"`{p.kernel.label}`" for p in elsewhere)),
            " and ".join(dict.fromkeys(str(p.on).upper() for p in elsewhere)))


def same_code_warning(comparison: Comparison, device: str) -> str | None:
    """A sentence for the page (Markdown) where every lever B changes from A is one that runs the same here; else
    None."""
    pairs = [(la, lb) for la, lb in zip(comparison.a.levers, comparison.b.levers, strict=True) if la != lb]
    if not pairs or not all(same_here(la, lb, device) for la, lb in pairs):
        return None
    said = "; ".join(f"`{la.name}` and `{lb.name}` run the same {_what_runs(la, lb, device)}" for la, lb in pairs)
    kernels, where = _apart_elsewhere([lv for pair in pairs for lv in pair], device)
    return (f"On {device.upper()}, {said}: the kernels that tell them apart ({kernels}) run on {where} only. "
            "A sweep of this comparison would map only noise; pick one whose stages differ on this device.")
