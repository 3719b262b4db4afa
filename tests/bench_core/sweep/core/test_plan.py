"""The planner (sweep.core.plan): which points run end to end, most in doubt first, within the budget."""
import math

import pytest

from bench_core.sweep.core import plan


def test_without_a_calibrated_error_points_run_nearest_one_first_and_unpredicted_first_of_all():
    cands = [plan.Candidate(0, 2.0), plan.Candidate(1, 1.02), plan.Candidate(2, None), plan.Candidate(3, 0.5),
             plan.Candidate(4, 0.9)]
    assert plan.order(cands, None) == [2, 1, 4, 0, 3]
    assert not any(plan.decided(c, None) for c in cands)


def test_a_calibrated_error_decides_the_far_points():
    assert plan.calibrated_error([0.1]) is None
    error = plan.calibrated_error([0.1, -0.1])
    assert error == pytest.approx(0.1)
    far, near = plan.Candidate(0, 2.0, 1.9, 2.1), plan.Candidate(1, 1.1, 1.05, 1.15)
    spread = (math.log(2.1) - math.log(1.9)) / (2 * 1.96)
    assert plan.doubt(far, error) == pytest.approx(math.log(2.0) / math.sqrt(spread ** 2 + 0.01))
    assert plan.decided(far, error) and not plan.decided(near, error)


def test_the_budget_stops_the_next_point_when_a_typical_point_no_longer_fits():
    cands = [plan.Candidate(0, 1.1), plan.Candidate(1, 3.0)]
    assert plan.next_point(cands, None, 1.0, []) == 0          # the first point's cost is unknown: it runs
    assert plan.next_point(cands, None, 20.0, [30.0]) is None   # 30 s a point, 20 s left
    assert plan.next_point(cands, None, 40.0, [30.0]) == 0
    assert plan.next_point(cands, None, None, [30.0] * 50) == 0   # no budget: every point runs
    assert plan.next_point([], None, None, []) is None
    assert plan.eta_s(3, 50.0, [30.0]) == 50.0 and plan.eta_s(3, None, [30.0]) == 90.0
