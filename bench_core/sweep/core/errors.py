"""How far a sweep's predictions landed from its measurements, worded once for the CLI, the page and the HTML
report: the step-time error at the GPU-bound points, how often the prediction's own interval held the measured
speedup, and the depth extrapolation's check against the full step. The speedup's rms error is in sweep.core.records
(the sweep's JSON and the history keep it)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from bench_core.results.near_one import speedup_decimals, times
from bench_core.sweep.core import plan
from bench_core.sweep.core.crossover import speedup_text
from bench_core.sweep.core.predict import depth_check
from bench_core.sweep.core.records import Paired, SweepResult, prediction_error, rms_ratio

NOT_PAIRED = "was both predicted and measured"   # "no point has both" left the reader to guess both of what


@dataclass(frozen=True)
class StepTimeError:
    """The step-time errors at the points of one bottleneck that ran end to end (both stages): their
    root-mean-square in log space, as a ratio, and the largest one. The target is the GPU-bound points'; a
    launch-bound point's time is the host's, predicted from its issue times, and is stated apart."""
    rms: float
    worst: float
    points: int
    bound: str = "gpu-bound"

    @property
    def text(self) -> str:
        # the rms is of the factor each point is off by (log space), so a low point weighs more than its percentage:
        # a map once read "15.9% rms, worst -15.7%", a mean above its worst; the worst's factor is said beside it
        factor = math.exp(abs(math.log1p(self.worst)))
        # both stages' steps at each point: "over 1 launch-bound point" with an rms below its worst read as a slip
        plural = "s" if self.points != 1 else ""
        return f"{self.rms:.1%} rms, worst {self.worst:+.1%} (off by ×{factor:.2f}; the rms is of each step's " \
               f"factor), over both stages' steps at {self.points} {BOUND_WORDS[self.bound]} point{plural}"


BOUND_WORDS = {"gpu-bound": "GPU-bound", "launch-bound": "launch-bound"}


def step_time_error(result: SweepResult, bound: str = "gpu-bound") -> StepTimeError | None:
    errors = [e for p in result.points if p.bound == bound and p.step_errors for e in p.step_errors]
    rms = rms_ratio(errors)
    # the worst as the rms weighs it: the largest factor off, so it is never below the rms
    return None if rms is None else StepTimeError(rms, max(errors, key=lambda e: abs(math.log1p(e))),
                                                  len(errors) // 2, bound)


@dataclass(frozen=True)
class ErrorFigure:
    """One of a sweep's prediction errors as every view shows it: what it is, and its figure or why it has none."""
    label: str
    text: str
    found: bool


def depth_checks(result: SweepResult) -> list[ErrorFigure]:
    """At the point where the stages' full-depth steps were timed, the depth extrapolation against them (a GPU
    sweep's; none on a CPU or in older files)."""
    stages = result.spec.comparison.in_family(result.spec.base.family)
    out = []
    for p in result.points:
        if p.prediction is None or not p.prediction.timings.full_here:
            continue
        found = [(name, depth_check(p.prediction.timings, s)) for name, s in zip("AB", stages, strict=True)]
        texts = [f"{name}: {c.text}" for name, c in found if c is not None]
        if texts:
            out.append(ErrorFigure(f"depth extrapolation against the full step timed at {p.label}", "; ".join(texts),
                                   True))
    return out


def error_figures(result: SweepResult) -> tuple[ErrorFigure, ...]:
    """The speedup's rms error, the step-time error and (where the full steps were timed) the depth extrapolation's
    check, worded once for the CLI, the page and the HTML report."""
    err, steps, host = prediction_error(result), step_time_error(result), step_time_error(result, "launch-bound")
    # the launch-bound points' error only where there is one: the page's worst had hidden a launch-bound point's error
    hosts = () if host is None else (ErrorFigure("step-time prediction error at launch-bound points (where "
                                                 "the host sets the pace)", host.text, True),)
    return (ErrorFigure("speedup prediction error (rms over the points measured)",
                        f"no point {NOT_PAIRED}" if err is None else f"{err:.1%}", err is not None),
            ErrorFigure("step-time prediction error at GPU-bound points",
                        f"no GPU-bound point {NOT_PAIRED}" if steps is None else steps.text, steps is not None),
            *hosts, coverage(result), held_out(result), *depth_checks(result), *host_while_predicting(result))


def host_while_predicting(result: SweepResult) -> tuple[ErrorFigure, ...]:
    """The host's cost to enqueue one kernel, probed at each point as it was predicted (a GPU sweep's): the
    predicted host time, and so each launch-bound prediction, moves with it. On an H100 it read 5.9-6.5 us over one
    FLCE sweep and 6.7-10.7 us over the next, whose predictor then put two points' host 29-37% long."""
    probed = [p.prediction.timings.launch_us for p in result.points
              if p.prediction is not None and p.prediction.timings.launch_us > 0]
    if not probed:
        return ()
    low, high = f"{min(probed):.1f}", f"{max(probed):.1f}"
    return (ErrorFigure("the host while predicting, its cost to enqueue one kernel",
                        (low if low == high else f"{low}–{high}") + f" µs over {len(probed)} point"
                        + ("s" if len(probed) != 1 else ""), True),)


def own_interval_count(pairs: list[Paired]) -> tuple[int, int, int]:
    """(held, judged, without): of the predictions with an interval, how many held the measured speedup; and how
    many had none (launch-bound ones), which cannot hold anything and are not counted as misses."""
    judged = [p for p in pairs if p.has_interval]
    return sum(p.inside for p in judged), len(judged), len(pairs) - len(judged)


def _missed(m: Paired) -> str:
    """A miss with one count of decimals for the measurement and the prediction: each at its own decimals,
    "measured ×1.01, predicted ×1.01 (1.01–1.02)" read as a hit."""
    d = speedup_decimals(m.low, m.high, m.measured)
    return f"measured {times(m.measured, d)}, predicted {speedup_text(m.predicted, m.low, m.high, d)}"


def coverage(result: SweepResult) -> ErrorFigure:
    """How often the prediction's own interval held the measured speedup, and where it did not."""
    held = [(p.label, pair) for p in result.points if (pair := p.paired) is not None]
    inside, judged, without = own_interval_count([pair for _, pair in held])
    missed = [(label, pair) for label, pair in held if pair.has_interval and not pair.inside]
    text = f"{inside} of {judged} measured points" + (
        f" ({without} more predicted without an interval, not counted)" if without else "") + "".join(
        f"; missed at {label}: {_missed(m)}" for label, m in missed)
    return ErrorFigure("measured speedup inside the prediction's own interval",
                       text if judged else f"no point {NOT_PAIRED}" if not held else "no prediction had an interval",
                       bool(judged))


def held_out_count(pairs: list[Paired]) -> tuple[int, int] | None:
    """How often the widened interval (plan.widened) holds the measurement when each point is widened by the
    other points' errors alone: the shown interval judged out of sample (widened by its own error, it is fitted
    to the point it judges). None with too few points for the others to give an error."""
    if len(pairs) <= plan.CALIBRATION_POINTS:
        return None
    held = 0
    for i, p in enumerate(pairs):
        error = plan.calibrated_error([math.log(q.measured / q.predicted) for j, q in enumerate(pairs) if j != i])
        wide = plan.widened(plan.Candidate(i, p.predicted, p.low, p.high), error)
        held += wide is not None and wide[0] <= p.measured <= wide[1]
    return held, len(pairs)


def held_out(result: SweepResult) -> ErrorFigure:
    found = held_out_count([pair for p in result.points if (pair := p.paired) is not None])
    return ErrorFigure("measured speedup inside the shown (widened) interval, each point widened by the others' "
                       "errors", f"needs {plan.CALIBRATION_POINTS + 1} measured points" if found is None
                       else f"{found[0]} of {found[1]} measured points", found is not None)
