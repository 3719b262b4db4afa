"""Pure figure builders: horizontal bars with full stage names, colour by meaning, nothing recomputed."""
from sample_runs import gpu_run

from bench_core.results import figures
from bench_core.results.summary import summarize


def test_speedup_bars_are_horizontal_with_full_names_intervals_and_meaningful_colours():
    fig = figures.speedup_bars(summarize(gpu_run()))
    bar = fig.data[0]
    assert bar.orientation == "h" and list(bar.y) == [s.key for s in summarize(gpu_run()).stages]
    assert bar.marker.color[1] == figures.FASTER and bar.marker.color[2] == figures.FAILED
    assert bar.x[2] == 0 and bar.text[2] == "failed (partial)"
    assert bar.error_x.array is not None


def test_failed_stage_is_left_out_of_throughput():
    fig = figures.throughput(summarize(gpu_run()))
    assert "apex-fusedadam+apex-fusedln+fp32" not in list(fig.data[0].y)


def test_comparison_lines_runs_up_by_stage_key():
    a, b = gpu_run(), gpu_run()
    fig = figures.speedup_bars([summarize(a), summarize(b)])
    assert len(fig.data) == 2 and list(fig.data[0].y) == list(fig.data[1].y)
    assert list(fig.layout.yaxis.categoryarray) == [s.key for s in a.stages]


def test_breakdown_stacks_categories_and_bottleneck_marks_the_threshold():
    summary = summarize(gpu_run())
    fig = figures.time_breakdown(summary)
    assert fig.layout.barmode == "stack" and {t.name for t in fig.data if t.type == "bar"} >= {"gemm", "cast/copy"}
    bars = figures.bottleneck(summary).data[0]
    assert "launch-bound" in bars.text[-1] and bars.marker.color[-1] == figures.SLOWER


def test_charts_that_do_not_apply_say_why():
    summary = summarize(gpu_run())
    assert "more than one GPU count" in figures.not_applicable("scaling", summary)
    assert figures.not_applicable("mfu", summary) is None


def test_kernel_grid_separates_pending_from_not_used():
    assert figures.CELL_COLORS["pending"] != figures.CELL_COLORS["not used"]
    fig = figures.kernel_grid(summarize(gpu_run()))
    assert all(label.split(". ", 1)[1] in [s.key for s in gpu_run().stages] for label in fig.data[0].y)
