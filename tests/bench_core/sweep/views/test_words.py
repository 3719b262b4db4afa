"""A sweep in words (sweep.views.words): why points have no peak-memory figure, of one point and of several, counted
in their own number."""
from dataclasses import replace
from pathlib import Path

from bench_core.config.bench_config import BenchConfig
from bench_core.results.records import Status
from bench_core.sweep.core.records import (
    PointMeasurement,
    PointPrediction,
    PointResult,
    SweepResult,
    from_json,
)
from bench_core.sweep.core.spec import (
    Axis,
    SweepSpec,
    grid,
    parse_comparison,
)
from bench_core.sweep.timing.timings import Part
from bench_core.sweep.views.words import memory_gaps
from helpers import step_timings, tiny_sweep


def test_a_point_without_a_peak_memory_figure_says_why():
    """An H200 FLCE prediction file (no point run, predictions from before peaks were predicted) has no memory
    map at all; the page said nothing of it. Each reason, hand-set: a CPU, a failed run, an old prediction, a
    second block read lower than the first."""
    from bench_core.sweep.views.words import memory_gaps, why_no_memory
    result = tiny_sweep()   # a CPU sweep: none of its points has a peak figure from a prediction
    first, second, third, fourth = result.points
    assert why_no_memory(result, third).one.startswith("it was predicted only, and on a CPU a prediction holds no")
    gpu = replace(result, device="cuda")
    assert why_no_memory(gpu, replace(second, measurement=replace(second.measurement, status=Status.OOM))).one == \
        "its run end to end ended without a figure (oom)"
    assert why_no_memory(gpu, replace(first, prediction=None)).one == "it was not predicted"
    assert why_no_memory(gpu, first).one.startswith("its prediction holds no peak memory")
    peaked = replace(first.prediction.timings, times=tuple(
        replace(t, peak_mib=100.0 if t.part == Part.STEP_1 else 90.0) for t in first.prediction.timings.times))
    assert why_no_memory(gpu, replace(first, prediction=replace(first.prediction, timings=peaked))).one.startswith(
        "its predicted peaks are noise: a stage's two-block step peaked lower")
    # the sentence counts them: points 2 and 4 measured a peak, 1 and 3 have none
    assert memory_gaps(gpu) == "2 of 4 points have no peak-memory figure: their predictions hold no peak memory " \
        "(the sweep's file is from before peaks were predicted)"
    unmeasured = replace(gpu, points=tuple(replace(p, measurement=None) for p in gpu.points))
    assert memory_gaps(unmeasured).startswith("none of the 4 points has a peak-memory figure: ")
    assert memory_gaps(replace(gpu, points=(second, fourth))) is None


DATA = Path(__file__).parents[4] / "docs" / "data"
ON_CPU = "on a CPU a prediction holds no peak memory (only a run end to end measures one)"


def _cpu_sweep(measured: int, points: int = 9) -> SweepResult:
    """A CPU sweep whose first `measured` points ran end to end (a process's peak each); the rest predicted only,
    and a CPU's prediction has no peak."""
    base = BenchConfig(depth=1, width=64, heads=2, seq_len=16, batch_size=2, vocab_size=128, device="cpu")
    spec = SweepSpec(parse_comparison("adam+layernorm+fp32,adam-fused+layernorm+fp32", "gpt"), base,
                     (Axis("width", tuple(64 * (n + 1) for n in range(points))),), None)
    timings = step_timings({"adam+layernorm+fp32": 1.0, "adam-fused+layernorm+fp32": 1.0})
    done = PointMeasurement(Status.OK, None, 1.0, 0.9, 1.1, "within one process", 10.0, 10.0, "unknown", 100.0, 90.0)
    return SweepResult(spec, "cpu", "CPU", tuple(
        PointResult(p.index, p.values, PointPrediction(1.0, 0.9, 1.1, 1.0, 1.0, "gpu-bound", timings), None,
                    done if p.index < measured else None) for p in grid(spec.axes, spec.base)), Status.DONE)


def test_the_sentence_agrees_in_number_with_the_points_it_counts():
    assert memory_gaps(_cpu_sweep(4)) == \
        f"5 of 9 points have no peak-memory figure: they were predicted only, and {ON_CPU}"
    assert memory_gaps(_cpu_sweep(8)) == \
        f"1 of 9 points has no peak-memory figure: it was predicted only, and {ON_CPU}"
    assert memory_gaps(_cpu_sweep(0)) == \
        f"none of the 9 points has a peak-memory figure: they were predicted only, and {ON_CPU}"
    assert memory_gaps(_cpu_sweep(0, points=1)) == \
        f"the one point has no peak-memory figure: it was predicted only, and {ON_CPU}"
    assert memory_gaps(_cpu_sweep(9)) is None


def test_each_reason_is_counted_in_its_own_number():
    sweep = _cpu_sweep(6)
    oom = PointMeasurement(Status.OOM, "out of memory")
    points = (replace(sweep.points[0], measurement=oom), replace(sweep.points[1], measurement=oom),
              replace(sweep.points[2], prediction=None, measurement=None), *sweep.points[3:])
    assert memory_gaps(replace(sweep, points=points)) == (
        "6 of 9 points have no peak-memory figure: 2 because their runs end to end ended without a figure (oom); "
        "1 because it was not predicted; 3 because they were predicted only, and " + ON_CPU)


def test_an_h200_file_from_before_peaks_were_predicted_says_so_of_all_its_points():
    """An H200 FLCE map: no point run end to end, its predictions from before peaks were predicted."""
    flce = from_json((DATA / "h200_2026-12-04_call29_sweep_flce_gpt_1.json").read_bytes())
    n = len(flce.points)
    assert memory_gaps(flce) == (f"none of the {n} points has a peak-memory figure: their predictions hold no peak "
                                 "memory (the sweep's file is from before peaks were predicted)")
