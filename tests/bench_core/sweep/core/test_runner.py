"""The sweep's loop (sweep.core.runner) with fake kernels and runs: the budget measures the points in doubt, holds
while predicting, and a cancel keeps what finished."""
import json
import math
import threading
from dataclasses import replace

import pytest

from bench_core.machine.probe import Probe
from bench_core.results.records import Status
from bench_core.sweep.core.errors import error_figures, step_time_error
from bench_core.sweep.core.records import (
    PointMeasurement,
    Source,
    crossovers,
    from_json,
    prediction_error,
    to_json,
)
from bench_core.sweep.core.runner import SweepHooks, run_sweep
from bench_core.sweep.core.spec import (
    grid,
)
from bench_core.sweep.timing.timings import KernelTime, Part, PointTimings
from bench_core.sweep.views.rows import csv_rows, shown_rows, shown_text_rows
from bench_core.sweep.views.words import summary_lines
from helpers import adam_pair_timings, tiny_sweep_spec

NO_GPU = Probe.from_dict({})   # a machine without CUDA; the fakes below run nothing on it


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _fake_run(speedups, predicted, clock, cost_s=60.0, measured=None):
    def predict_points(points, comparison, device, cancel):
        for p in points:
            yield p.index, adam_pair_timings(predicted[p.index], 1.0), ()

    def measure_point(cfg, comparison, probe, hooks):
        clock.t += cost_s
        index = (64, 128, 256, 512).index(cfg.width)
        if measured is not None:
            measured.append(index)
        s = speedups[index]
        return PointMeasurement(Status.OK, None, s, s / 1.05, s * 1.05, "across 3 processes", 10.0 * s, 10.0,
                                "gpu-bound", 100.0, 80.0, cost_s)
    return predict_points, measure_point


def _points(spec):
    return grid(spec.axes, spec.base)


def test_the_budget_measures_the_points_in_doubt_and_keeps_the_rest_predicted():
    clock, measured = _Clock(), []
    predicted = [0.5, 0.95, 1.3, 2.5]          # point 1 is nearest ×1.00, then point 2
    fake_predict, fake_measure = _fake_run([0.55, 0.97, 1.2, 2.4], predicted, clock, measured=measured)
    result = run_sweep(tiny_sweep_spec(budget=150.0), [*_points(tiny_sweep_spec())], NO_GPU,
                       SweepHooks(clock=clock, predict_points=fake_predict, measure_point=fake_measure))
    assert measured == [1, 2]                 # 60 s each: a third would not fit in the 30 s left
    assert [p.source for p in result.points] == [Source.PREDICTED, Source.MEASURED, Source.MEASURED,
                                                 Source.PREDICTED]
    assert result.status == Status.DONE and "2 points kept their prediction" in " ".join(result.notes)
    assert result.points[1].prediction_error == pytest.approx(0.97 / 0.95 - 1)
    assert prediction_error(result) == pytest.approx(math.expm1(math.sqrt(
        (math.log(0.97 / 0.95) ** 2 + math.log(1.2 / 1.3) ** 2) / 2)))
    assert result.points[2].measurement.peak_change == pytest.approx(-0.2)
    # each stage's step time, predicted (adam: the predicted figure, adam-fused: 1 ms) against measured (10·s, 10)
    assert result.points[1].step_errors == pytest.approx((0.95 / 9.7 - 1, 1 / 10 - 1))
    assert result.points[0].step_errors is None        # predicted only
    assert result.points[1].prediction.a_gpu_ms == pytest.approx(0.95)   # the GPU's share, kept beside the step
    errors = [0.95 / 9.7 - 1, -0.9, 1.3 / 12 - 1, -0.9]
    steps = step_time_error(result)
    assert steps.points == 2 and steps.worst == pytest.approx(0.95 / 9.7 - 1)
    assert steps.rms == pytest.approx(math.expm1(math.sqrt(sum(math.log1p(e) ** 2 for e in errors) / 4)))
    assert "over both stages' steps at 2 GPU-bound points" in steps.text
    # the worst is the largest factor off, as the rms weighs it: never below the rms, and said as that factor
    assert math.exp(abs(math.log1p(steps.worst))) - 1 >= steps.rms
    assert f"worst {steps.worst:+.1%} (off by ×{1 / (1 + steps.worst):.2f}" in steps.text
    # a launch-bound point's time is the host's: it is not counted
    host = result.with_point(replace(result.points[2], measurement=replace(result.points[2].measurement,
                                                                            bound="launch-bound")))
    assert step_time_error(host).points == 1
    # and is stated apart, so the page's "worst" is never beaten by a figure further down its table
    launch = step_time_error(host, "launch-bound")
    assert launch.points == 1 and "over both stages' steps at 1 launch-bound point" in launch.text
    assert any(e.label.startswith("step-time prediction error at launch-bound") and e.text == launch.text
               for e in error_figures(host))
    assert not any("launch-bound" in e.label for e in error_figures(result))
    # every view words both errors from one place: the figures here, the reason where no point has both
    rms, step, _, _ = error_figures(result)
    assert rms.found and rms.text == f"{prediction_error(result):.1%}" and step.text == steps.text
    unmeasured = error_figures(replace(result, points=tuple(replace(p, measurement=None) for p in result.points)))
    assert [(e.found, e.text) for e in unmeasured] == [(False, "no point was both predicted and measured"),
                                                        (False, "no GPU-bound point was both predicted and "
                                                                "measured"),
                                                        (False, "no point was both predicted and measured"),
                                                        (False, "needs 3 measured points")]

    row = csv_rows(result)[1]
    assert row["a_step_error"] == pytest.approx(errors[0]) and row["measured_b_ms"] == 10.0
    # the shown table: the axis under its own name, then the answer
    shown = shown_rows(result)[1]
    assert list(shown)[:3] == ["width", "speedup (B over A)", "source"] and shown["width"] == 128
    # as text, the page's and the report's alike: a percent signed to one decimal, a missing figure "–"
    texts = shown_text_rows(result)
    assert texts[1]["width"] == "128" and texts[1]["A step error"] == f"{errors[0]:+.1%}"
    assert texts[0]["measured"] == "–" and texts[0]["speedup (B over A)"].startswith("×")
    (c,) = crossovers(result)                 # 0.97 at 128 (measured), 1.2 at 256 (measured)
    assert c.value == pytest.approx(math.exp(math.log(128) + (-math.log(0.97)) * math.log(2) /
                                             (math.log(1.2) - math.log(0.97))))


def test_a_breakdown_part_not_timed_leaves_the_prediction_and_a_step_not_timed_takes_it():
    """The prediction is made of the stages' whole steps: a part of the breakdown that could not run here (a vendor's
    kernel under compile, say) does not take it away; a step that could not run does, and the note says why."""
    steps = adam_pair_timings(2.0, 1.0)
    no_b = PointTimings(tuple(t for t in steps.times if t.variant != "adam-fused+layernorm+fp32"), 0.0, 1)
    timed = {64: (steps, ("gemm fp8: RuntimeError: no FP8 here",)), 128: (no_b, ("step@1 adam-fused+layernorm+fp32: "
                                                                               "OutOfMemoryError",))}

    clock = _Clock()

    def predict_points(points, comparison, device, cancel):
        for p in points:
            clock.t += 1.0   # predicting spends the whole budget: nothing runs end to end
            yield (p.index, *timed[p.config.width])
    spec = tiny_sweep_spec(budget=2.0, widths=(64, 128))
    result = run_sweep(spec, _points(tiny_sweep_spec(widths=(64, 128))), NO_GPU,
                       SweepHooks(clock=clock, predict_points=predict_points,
                                  measure_point=lambda *a: pytest.fail("a spent budget measures nothing")))
    first, second = result.points
    assert first.prediction.speedup == pytest.approx(2.0) and first.prediction_note is None
    assert second.prediction is None
    assert "was not timed here" in second.prediction_note and "OutOfMemoryError" in second.prediction_note
    # what predicting took is kept with the sweep (1 s a point here), so a file holds its own cost
    assert result.predict_s == pytest.approx(2.0) and "predicting took 2 s" in result.notes
    assert from_json(to_json(result)).predict_s == pytest.approx(2.0)
    # with the breakdown asked for, the note says what it cost: 1.25 s the first point's parts took
    timed = {w: (replace(t, breakdown_s=1.25) if t else t, m) for w, (t, m) in timed.items()}
    with_parts = run_sweep(replace(tiny_sweep_spec(budget=2.0, widths=(64, 128)), breakdown=True),
                           _points(tiny_sweep_spec(widths=(64, 128))), NO_GPU,
                           SweepHooks(clock=clock, predict_points=predict_points,
                                      measure_point=lambda *a: pytest.fail("a spent budget measures nothing")))
    # the point whose prediction fell (its step not timed) took its timings with it: only the first is counted
    assert "predicting took 2 s, 1 s of it timing the breakdown's parts" in with_parts.notes
    assert from_json(to_json(with_parts)).points[0].prediction.timings.breakdown_s == 1.25
    # the full-depth steps' cost is said once, at the point they were timed, though every point keeps them (call
    # 34's FP8 prediction took 404 s and no file said where)
    full = KernelTime(Part.STEP_FULL, "adam+layernorm+fp32", 5.0, 5.0, 5.0, 10, 1, wall_s=0.75)
    first_t, first_m = timed[64]
    timed[64] = (replace(first_t, times=(*first_t.times, full), full_here=True), first_m)
    timed[128] = (replace(timed[128][0], times=(*timed[128][0].times, full)), timed[128][1])
    with_full = run_sweep(spec, _points(tiny_sweep_spec(widths=(64, 128))), NO_GPU,
                          SweepHooks(clock=clock, predict_points=predict_points,
                                     measure_point=lambda *a: pytest.fail("a spent budget measures nothing")))
    assert "predicting took 2 s, 1 s of it timing the full-depth steps (once a sweep)" in with_full.notes
    assert from_json(to_json(with_full)).points[0].prediction.timings.find(Part.STEP_FULL, full.variant).wall_s == 0.75


def test_the_budget_holds_while_predicting_between_points_and_inside_one():
    """A 2 s budget and points that take 1 s each to predict: the timing stops after two, and the other two are
    neither predicted nor measured, each saying why. A point whose timing outlasts the budget is stopped inside it:
    its timing process is told to stop (here a fake that waits to be told)."""
    clock, closed = _Clock(), []

    def predict_points(points, comparison, device, cancel):
        try:
            for p in points:
                clock.t += 1.0
                yield p.index, adam_pair_timings(2.0, 1.0), ()
        finally:
            closed.append(True)   # the timing process is killed when its points stop being read
    result = run_sweep(tiny_sweep_spec(budget=2.0), _points(tiny_sweep_spec()), NO_GPU, SweepHooks(
        clock=clock, predict_points=predict_points, measure_point=lambda *a: pytest.fail("the budget is spent")))
    assert [p.prediction is not None for p in result.points] == [True, True, False, False] and closed
    assert {p.prediction_note for p in result.points[2:]} == {"the 2 s budget ran out while predicting"}
    assert "0 of 4 points measured end to end, 2 predicted only, 2 not run (the budget ran out)" in result.notes
    assert "2 points kept their prediction: the 2 s budget was spent predicting, before any point could run" in \
        result.notes

    def stuck(points, comparison, device, cancel):
        clock.t += 5.0                     # the first point's compile outlasts the budget...
        assert cancel.wait(10), "the budget's watcher never stopped the timing"
        return                             # ...and the process, told to stop, yields nothing more
        yield
    clock.t = 0.0
    stopped = run_sweep(tiny_sweep_spec(budget=2.0), _points(tiny_sweep_spec()), NO_GPU, SweepHooks(
        clock=clock, predict_points=stuck, measure_point=lambda *a: pytest.fail("the budget is spent")))
    assert all(p.prediction is None and "budget ran out while predicting" in p.prediction_note
               for p in stopped.points) and stopped.status == Status.DONE


def test_a_point_the_budget_left_unpredicted_says_so_once():
    """The terminal read "not predicted: not predicted: the 2 s budget ran out while predicting": the note is the
    reason alone, under "why not predicted" on the page and after "not predicted:" in the terminal; a file saved
    with the old note reads the same."""
    clock = _Clock()

    def predict_points(points, comparison, device, cancel):
        for p in points:
            clock.t += 1.0
            yield p.index, adam_pair_timings(2.0, 1.0), ()
    result = run_sweep(tiny_sweep_spec(budget=2.0), _points(tiny_sweep_spec()), NO_GPU, SweepHooks(
        clock=clock, predict_points=predict_points, measure_point=lambda *a: pytest.fail("the budget is spent")))
    lines = [line for line in summary_lines(result) if "budget ran out while predicting" in line]
    assert len(lines) == 2 and all(line.count("not predicted") == 1 for line in lines), lines
    assert all(line.endswith("; not predicted: the 2 s budget ran out while predicting") for line in lines)
    assert {r["why not predicted"] for r in shown_text_rows(result)[2:]} == {
        "the 2 s budget ran out while predicting"}
    old = json.loads(to_json(result))
    for point in old["points"][2:]:
        point["prediction_note"] = "not predicted: the 2 s budget ran out while predicting"
    assert summary_lines(from_json(json.dumps(old).encode())) == summary_lines(result)


def test_without_a_budget_every_point_runs_and_a_cancel_keeps_what_finished():
    clock = _Clock()
    fake_predict, fake_measure = _fake_run([0.55, 0.97, 1.2, 2.4], [0.5, 0.95, 1.3, 2.5], clock)
    everything = run_sweep(tiny_sweep_spec(), _points(tiny_sweep_spec()), NO_GPU,
                           SweepHooks(clock=clock, predict_points=fake_predict, measure_point=fake_measure))
    assert all(p.measured for p in everything.points)
    cancel = threading.Event()

    def measure_then_cancel(cfg, comparison, probe, hooks):
        cancel.set()                           # the user cancels while the first point runs; it still finishes
        return fake_measure(cfg, comparison, probe, hooks)
    cancelled = run_sweep(tiny_sweep_spec(), _points(tiny_sweep_spec()), NO_GPU,
                          SweepHooks(clock=clock, cancel=cancel, predict_points=fake_predict,
                                     measure_point=measure_then_cancel))
    assert cancelled.status == Status.CANCELLED and sum(p.measured for p in cancelled.points) == 1
