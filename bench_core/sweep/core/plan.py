"""Which point to run end to end next, given the predictions, what the measured points said about the
prediction's error, and the time left. Pure arithmetic, no torch.

A point's doubt is its predicted speedup's distance from ×1.00 in log space, in units of its uncertainty: the
prediction's own spread (its interval from the parts' p10/p90 times) combined with the prediction error measured so
far in this sweep (root-mean-square of log(measured / predicted)). Until CALIBRATION_POINTS points have both, the
error is unknown and every point is in doubt; points are then run from the nearest to ×1.00 outwards. With no
budget every point runs; with one, points run most doubtful first while the typical point's cost still fits, and
the rest keep their prediction (labelled predicted).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

CALIBRATION_POINTS = 2   # points with both a prediction and a measurement before the error is estimated
Z_95 = 1.96               # a prediction further than this many uncertainties from ×1.00 is decided by it


@dataclass(frozen=True)
class Candidate:
    index: int
    speedup: float | None        # predicted; None: no prediction, the point must run to have a figure
    low: float | None = None
    high: float | None = None


def calibrated_error(log_errors: list[float]) -> float | None:
    """Root-mean-square of log(measured / predicted), or None with fewer than CALIBRATION_POINTS of them."""
    if len(log_errors) < CALIBRATION_POINTS:
        return None
    return math.sqrt(sum(e * e for e in log_errors) / len(log_errors))


def sigma(c: Candidate, error: float | None) -> float | None:
    """The log-speedup's uncertainty: the interval's half-width as one standard error, combined with the
    calibrated error; None (unbounded) while the error is unknown."""
    if c.speedup is None or error is None:
        return None
    spread = (math.log(c.high) - math.log(c.low)) / (2 * Z_95) if c.low and c.high else 0.0
    return math.sqrt(spread ** 2 + error ** 2)


def doubt(c: Candidate, error: float | None) -> float:
    """|log predicted speedup| / sigma: small is in doubt. A point without a prediction is the most in doubt (0);
    with an unknown error, the distance alone orders the points (every one still in doubt)."""
    if c.speedup is None:
        return 0.0
    distance = abs(math.log(c.speedup))
    s = sigma(c, error)
    if s is None:
        return distance
    return math.inf if s == 0 else distance / s


def widened(c: Candidate, error: float | None) -> tuple[float, float] | None:
    """The predicted speedup's 95% interval with the calibrated error folded in (`sigma`, Z_95 each side): what a
    prediction can claim once measured points have shown how far predictions land; None while the error is
    unknown (or without a prediction)."""
    s = sigma(c, error)
    if s is None or c.speedup is None:
        return None
    return c.speedup * math.exp(-Z_95 * s), c.speedup * math.exp(Z_95 * s)


def decided(c: Candidate, error: float | None) -> bool:
    """The prediction alone settles which side of ×1.00 the point is on."""
    return error is not None and c.speedup is not None and doubt(c, error) > Z_95


def order(candidates: list[Candidate], error: float | None) -> list[int]:
    """The points' indices, most in doubt first (ties: the grid's order)."""
    return [c.index for c in sorted(candidates, key=lambda c: (doubt(c, error), c.index))]


def point_cost(walls: list[float]) -> float | None:
    """A point's expected cost end to end: the mean of those measured so far; None before the first."""
    return sum(walls) / len(walls) if walls else None


def next_point(candidates: list[Candidate], error: float | None, budget_left_s: float | None,
               walls: list[float]) -> int | None:
    """The next point to run end to end, or None: none is left, or the budget cannot pay for another. The first
    point always runs when any budget is left (its cost is not known before)."""
    if not candidates:
        return None
    if budget_left_s is not None:
        cost = point_cost(walls)
        if budget_left_s <= 0 or (cost is not None and cost > budget_left_s):
            return None
    return order(candidates, error)[0]


def eta_s(remaining: int, budget_left_s: float | None, walls: list[float]) -> float | None:
    """Time left: the remaining points at the measured cost each, no more than the budget left."""
    cost = point_cost(walls)
    if cost is None:
        return None
    eta = remaining * cost
    return eta if budget_left_s is None else max(0.0, min(eta, budget_left_s))
