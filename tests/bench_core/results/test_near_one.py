"""A speedup's point never prints onto its own interval's bound (bench_core.results.near_one)."""
from __future__ import annotations

from bench_core.results.near_one import MAX_DECIMALS, span, speedup_decimals, times


def _said(point: float, low: float, high: float) -> str:
    d = speedup_decimals(low, high, point)
    return f"{times(point, d)} ({span(low, high, d)})"


def test_a_point_inside_its_interval_is_never_printed_on_a_bound():
    # two decimals would read "×1.02 (1.01–1.02)": the point on its upper bound
    assert _said(1.0184, 1.0121, 1.0242) == "×1.018 (1.012–1.024)"
    assert _said(0.9751, 0.9712, 0.9849) == "×0.975 (0.971–0.985)"
    # a point far from both bounds keeps two decimals
    assert _said(1.50, 1.40, 1.61) == "×1.50 (1.40–1.61)"


def test_the_decimals_stop_at_the_most_any_view_prints():
    # a point a hair from its bound: no number of decimals a reader wants separates them, so it stops
    assert speedup_decimals(1.2, 1.4, 1.2 + 1e-9) == MAX_DECIMALS
    # a point on its bound (one round, a constant series) is shown on it: that is what was measured
    assert speedup_decimals(2.0, 2.0, 2.0) == 2
