"""Issue 21's targets for a sweep's predictor, from sweep JSON files: each stage's predicted step time against the
measured one at every point that ran end to end (target: within 10% wherever the point is GPU-bound), and whether
the prediction put the point on the right side of x1.00 (target: at least 90% of points).

    python benchmarks/sweep_targets.py SWEEP.json [SWEEP.json ...]
    python benchmarks/sweep_targets.py --measured M1.json [M2.json ...] --predicted P.json
    python benchmarks/sweep_targets.py --repredict ...   (either form, predictions made again from kept timings)

With --predicted, the predictions come from that file and the measurements from the others, points paired by their
axis values (a sweep that only predicted, checked against earlier runs of the same comparison on the same GPU).
A point's bound is its measured stage B's bottleneck. Each side is read from its interval, the way the sweep reads
a point for its user (crossover.Verdict): above (low > 1, pays), below (high < 1, costs) or x1.00 (it holds 1: no
measurable difference). The prediction is right where its side is the measured one: what it told the user before
the point ran is what the measurement says. A prediction that claims a side where the measurement cannot tell one
is wrong (it told the user more than is known), and so is one that holds x1.00 where the measurement has a side.
(Not the predicted speedup's side alone, nor a measured x1.00 matched by any overlapping prediction: with
2-process measured intervals wide, overlap is near-automatic and the count would no longer judge the predictor. That
looser rule's runs and why it was dropped: docs/BENCHMARKS.md, "The sweep side target under its restored rule".)
The last lines count the points whose measured speedup lies inside the prediction's own interval, and inside the
interval a sweep shows, widened by the error of the other measured points (leave one out; no target for either).
Beside each stage's step-time error: its predicted kernel time against the kernels its profiled steps measured, and
its predicted host time against the host time its timed steps measured (read the host's at launch-bound points:
where the GPU sets the pace, the measured host also waits for room in the launch queue).
Exit 0 with the counts; 2 with a message for bad input.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from bench_core.sweep.core.errors import held_out_count, own_interval_count
from bench_core.sweep.core.records import Paired, PointResult, SweepResult, from_json, is_sweep_json
from bench_core.sweep.core.runner import repredicted

STEP_TARGET = 0.10     # the issue's: predicted step time within 10% of the measured one
SIDE_TARGET = 0.90     # the crossover's side right at 90% of points or more
SIDE_RULE = "each side read from its interval, as the sweep reads a point (above, below, x1.00 where it holds 1)"


def side(low: float, high: float) -> str:
    return "above" if low > 1 else "below" if high < 1 else "x1.00"


@dataclass(frozen=True)
class Check:
    source: str            # the measuring file
    label: str
    bound: str
    a_error: float         # predicted / measured step time - 1, stage A
    b_error: float
    measured: tuple[float, float]    # the measured speedup's interval
    predicted: tuple[float, float]   # the predicted one
    predicted_side: str
    kernel_errors: tuple[float, float] | None = None   # predicted GPU time / measured kernel time - 1 (newer files)
    host_errors: tuple[float, float] | None = None     # predicted host time / measured host time - 1 (newer files)
    paired: Paired | None = None   # the measured and predicted speedups: the interval counts read them

    @property
    def measured_side(self) -> str:
        return side(*self.measured)

    @property
    def step_ok(self) -> bool:
        return abs(self.a_error) <= STEP_TARGET and abs(self.b_error) <= STEP_TARGET

    @property
    def side_ok(self) -> bool:
        return self.measured_side == self.predicted_side


def check_point(source: str, measured: PointResult, predicted: PointResult) -> Check | None:
    # the step errors as the engine derives them, the prediction taken from the predicting file
    paired = replace(measured, prediction=predicted.prediction)
    m, p, speedup, errors = paired.measurement, paired.prediction, paired.measured_speedup, paired.step_errors
    if speedup is None or m is None or p is None or errors is None:
        return None
    low = m.low if m.low is not None else speedup
    high = m.high if m.high is not None else speedup
    return Check(source, measured.label, m.bound or "unknown", *errors, (low, high), (p.low, p.high),
                 side(p.low, p.high), paired.kernel_errors, paired.host_errors, paired.paired)


def checks(measured: list[tuple[str, SweepResult]], predicted: SweepResult | None) -> list[Check]:
    out = []
    for source, result in measured:
        by_values = {p.values: p for p in (predicted or result).points}
        for point in result.points:
            pred = by_values.get(point.values)
            found = check_point(source, point, pred) if pred is not None else None
            if found:
                out.append(found)
    return out


def _pair(errors: tuple[float, float] | None) -> str:
    return f"{errors[0]:>+8.1%} {errors[1]:>+8.1%}" if errors else f"{'-':>8} {'-':>8}"


def report(found: list[Check]) -> list[str]:
    lines = [f"{'file':<44} {'point':<28} {'bound':<13} {'A step':>8} {'B step':>8} {'A kern':>8} {'B kern':>8}"
             f" {'A host':>8} {'B host':>8}  side measured/predicted"]
    for c in found:
        lines.append(f"{c.source:<44} {c.label:<28} {c.bound:<13} {c.a_error:>+8.1%} {c.b_error:>+8.1%} "
                     f"{_pair(c.kernel_errors)} {_pair(c.host_errors)}  "
                     f"{c.measured_side}/{c.predicted_side}{'' if c.side_ok else '  (wrong side)'}")
    gpu = [c for c in found if c.bound == "gpu-bound"]
    steps_ok = sum(c.step_ok for c in gpu)
    sides_ok = sum(c.side_ok for c in found)
    lines.append(f"step time within {STEP_TARGET:.0%} at GPU-bound points: {steps_ok} of {len(gpu)}"
                 + (f" (target: all) {'met' if gpu and steps_ok == len(gpu) else 'missed'}" if gpu else ""))
    if found:
        lines.append(f"side of x1.00 predicted right: {sides_ok} of {len(found)} ({sides_ok / len(found):.0%}; "
                     f"target >= {SIDE_TARGET:.0%}) {'met' if sides_ok / len(found) >= SIDE_TARGET else 'missed'}; "
                     f"{SIDE_RULE}")
        # no target: how far the prediction's own interval can be taken at its word (the sweep widens it by its errors)
        inside, judged, without = own_interval_count([c.paired for c in found if c.paired])
        lines.append("measured speedup inside the prediction's own interval: "
                     f"{inside} of {judged}" + (f" ({without} predicted without an interval, not counted)"
                                                if without else ""))
        out = held_out_count([c.paired for c in found if c.paired])
        lines.append("measured speedup inside the widened interval, each point widened by the others' errors: "
                     + (f"{out[0]} of {out[1]}" if out else "too few points"))
    else:
        lines.append("no point has both a prediction and a measurement")
    return lines


def _load(path: str) -> SweepResult:
    text = Path(path).read_text(encoding="utf-8")
    if not is_sweep_json(text):
        raise ValueError(f"{path}: not a sweep JSON (python -m bench_core sweep --json writes one)")
    return from_json(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="sweep JSON files, each checked against its own predictions")
    ap.add_argument("--measured", nargs="+", default=[], help="sweep JSON files whose measurements are checked")
    ap.add_argument("--predicted", default=None, help="a sweep JSON whose predictions the --measured files check")
    ap.add_argument("--repredict", action="store_true",
                    help="make each prediction again from the timings its file kept, with this checkout's predictor "
                         "(a hindcast: a changed predictor judged on timings already taken)")
    args = ap.parse_args(argv)
    paths = args.files + args.measured
    if not paths or (args.measured and not args.predicted):
        print("error: give sweep JSON files, or --measured FILES with --predicted FILE", file=sys.stderr)
        return 2
    try:
        measured = [(Path(p).name, _load(p)) for p in paths]
        predicted = _load(args.predicted) if args.predicted else None
        if args.repredict:
            measured = [(name, repredicted(r)) for name, r in measured]
            predicted = repredicted(predicted) if predicted else None
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(report(checks(measured, predicted))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
