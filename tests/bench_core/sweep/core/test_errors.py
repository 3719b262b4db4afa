"""How far the predictions landed (sweep.core.errors): the step error split, the own interval's coverage, the
out-of-sample check."""
import math
from dataclasses import replace

import pytest

from bench_core.results.records import Status
from bench_core.sweep.core import plan
from bench_core.sweep.core.errors import error_figures
from bench_core.sweep.core.records import (
    PointMeasurement,
    PointPrediction,
    PointResult,
    SweepResult,
    from_json,
    to_json,
)
from bench_core.sweep.timing.timings import PointTimings
from bench_core.sweep.views.rows import csv_rows
from helpers import tiny_sweep, tiny_sweep_spec


def test_a_step_error_splits_into_kernels_the_parts_miss_and_the_gpus_idle():
    """Predicted 100 ms (90 of kernels) against a measured 110 ms step with 100 ms of kernels: the step is 9.1%
    short, of which the kernels 10% short; the rest is time the GPU idled."""
    pred = PointPrediction(2.0, 1.9, 2.1, 100.0, 50.0, "gpu-bound", PointTimings((), 0.0), 90.0, 45.0, 30.0, 40.0)
    meas = PointMeasurement(Status.OK, speedup=2.0, low=1.9, high=2.1, a_ms=110.0, b_ms=55.0, bound="gpu-bound",
                            a_kernel_ms=100.0, b_kernel_ms=50.0, a_host_ms=25.0, b_host_ms=50.0)
    point = PointResult(0, (("width", 64),), pred, None, meas)
    assert point.step_errors == pytest.approx((100 / 110 - 1, 50 / 55 - 1))
    assert point.kernel_errors == pytest.approx((-0.1, -0.1))
    assert replace(point, prediction=replace(pred, a_gpu_ms=None)).kernel_errors is None   # an older file
    assert replace(point, measurement=replace(meas, b_kernel_ms=None)).kernel_errors is None  # CPU: no trace
    sweep = SweepResult(tiny_sweep_spec(), "cuda", "GPU", (point,))
    row = csv_rows(from_json(to_json(sweep)))[0]
    assert row["a_kernel_error"] == pytest.approx(-0.1) and row["measured_b_kernel_ms"] == 50.0
    # the host's share: predicted 30 and 40 ms to issue a step against 25 and 50 measured
    assert point.host_errors == pytest.approx((0.2, -0.2))
    assert row["a_host_error"] == pytest.approx(0.2) and row["measured_b_host_ms"] == 50.0
    assert replace(point, prediction=replace(pred, b_host_ms=None)).host_errors is None   # an older file, or a CPU
    # and its peak memory: predicted 900 and 700 MiB against 1,000 measured for each
    peaks = replace(point, prediction=replace(pred, a_peak_mib=900.0, b_peak_mib=700.0),
                    measurement=replace(meas, a_peak_mib=1000.0, b_peak_mib=1000.0))
    assert peaks.peak_errors == pytest.approx((-0.1, -0.3))
    assert csv_rows(replace(sweep, points=(peaks,)))[0]["b_peak_error"] == pytest.approx(-0.3)


def test_how_often_the_predictions_own_interval_held_the_measurement():
    """Hand-set: width 128 predicted ×1.10 (1.00–1.20), measured ×1.00, on its edge: held; width 512 predicted
    ×2.20 (2.00–2.40), measured ×2.60: missed, and named. The sweep's widened interval is not the judge: it is
    fitted to these very errors."""
    from bench_core.sweep.core.errors import coverage
    result = tiny_sweep()
    last = result.points[3]
    result = result.with_point(replace(last, measurement=replace(last.measurement, speedup=2.6)))
    assert [p.paired.inside if p.paired else None for p in result.points] == [None, True, None, False]
    held = coverage(result)
    assert held.found and held.text == "1 of 2 measured points; missed at width=512: measured ×2.60, predicted " \
        "×2.20 (2.00–2.40)"
    assert held in error_figures(result)
    # a prediction kept without spread (launch-bound ones) holds nothing: not counted, said apart
    second = result.points[1]
    flat = result.with_point(replace(second, prediction=replace(second.prediction, low=1.1, high=1.1)))
    assert coverage(flat).text == "0 of 1 measured points (1 more predicted without an interval, not counted); " \
        "missed at width=512: measured ×2.60, predicted ×2.20 (2.00–2.40)"
    last = flat.points[3]
    both = flat.with_point(replace(last, prediction=replace(last.prediction, low=2.2, high=2.2)))
    assert not coverage(both).found and coverage(both).text == "no prediction had an interval"


def test_the_shown_interval_is_judged_out_of_sample():
    """Hand-computed: log errors -4.3%, +22.3%, 0 (measured ×2.00, ×1.00, ×0.50 against predicted ×2.088 (1.9–2.3),
    ×0.80 (0.7–0.9), ×0.50 (0.4–0.6)). Each point widened by the other two's rms: ×2.00 inside 1.51–2.89, ×1.00
    outside 0.70–0.92, ×0.50 inside 0.34–0.73. Two points leave one with a single other: too few to estimate."""
    from bench_core.sweep.core.errors import held_out_count
    from bench_core.sweep.core.records import Paired
    pairs = [Paired(2.0, 95 / 45.5, 1.9, 2.3), Paired(1.0, 0.8, 0.7, 0.9), Paired(0.5, 0.5, 0.4, 0.6)]
    assert held_out_count(pairs) == (2, 3)
    assert held_out_count(pairs[:2]) is None
    # widened by all three errors, the ×1.00 point would be judged by an interval its own 22% error had widened
    assert plan.widened(plan.Candidate(1, 0.8, 0.7, 0.9), plan.calibrated_error(
        [math.log(p.measured / p.predicted) for p in pairs]))[1] > 1.0
