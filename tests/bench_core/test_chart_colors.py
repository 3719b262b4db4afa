"""A run's colour in a comparison is a name only: never a colour that means a verdict or a bottleneck elsewhere
(issue 42, item 6: run B was drawn in the orange of launch-bound)."""
import itertools

from sample_runs import gpu_run

from bench_core.results import chart_layout, figures
from bench_core.results.summary import summarize


def test_the_distance_is_zero_for_a_colour_and_large_for_black_against_white():
    assert chart_layout.color_distance("#e65100", "#e65100") == 0
    assert abs(chart_layout.color_distance("#000000", "#ffffff") - 100) < 0.1   # L* runs 0 to 100


def test_run_colours_are_disjoint_from_every_meaning_colour():
    near = [(run, meaning, round(chart_layout.color_distance(run, meaning), 1))
            for run in chart_layout.RUN_COLORS for meaning in chart_layout.MEANING_COLORS
            if chart_layout.color_distance(run, meaning) < chart_layout.MIN_COLOR_DISTANCE]
    assert not near, near
    assert set(chart_layout.BOUND_COLORS.values()) <= set(chart_layout.MEANING_COLORS)


def test_run_colours_are_told_apart_from_each_other():
    near = [(a, b) for a, b in itertools.combinations(chart_layout.RUN_COLORS, 2)
            if chart_layout.color_distance(a, b) < chart_layout.MIN_COLOR_DISTANCE]
    assert not near, near


def test_two_runs_compared_are_drawn_in_colours_far_from_the_kernel_share_charts():
    """As drawn: each run's bars in the compare view against the bottleneck chart's verdict colours."""
    a, b = summarize(gpu_run()), summarize(gpu_run())
    bound = {t.marker.color for t in figures.bottleneck([a, b]).data}
    compared = [t for t in figures.speedup_bars([a, b]).data if t.type == "bar"]
    run_colours = {c for t in compared for c, s in zip(t.marker.color, a.stages, strict=True) if s.ranked}
    assert len(run_colours) == 2
    assert all(chart_layout.color_distance(r, v) >= chart_layout.MIN_COLOR_DISTANCE
               for r in run_colours for v in bound), (run_colours, bound)
