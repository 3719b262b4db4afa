"""Where a speedup crosses ×1.00 along one axis: log-speedup interpolated linearly against the log of the axis
value between the two neighbouring points whose speedups lie on either side, and the crossing's interval from the
points' own intervals (the crossing of the upper bounds and of the lower bounds), never narrower than the two swept
values around it (nothing between them was measured). Pure arithmetic, no torch.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import StrEnum


class Direction(StrEnum):
    PAYS_ABOVE = "pays above"    # slower below the crossing, faster above it
    PAYS_BELOW = "pays below"


@dataclass(frozen=True)
class Estimate:
    """One point of a line: the axis value, the speedup and its 95% interval (low, high), and whether it was
    measured end to end (None: not known, older files)."""
    x: float
    speedup: float
    low: float
    high: float
    measured: bool | None = None


@dataclass(frozen=True)
class Crossover:
    axis: str
    value: float                 # the axis value where the speedup is ×1.00
    low: float | None            # its interval; None: that side lies beyond the swept values
    high: float | None
    direction: Direction
    # Some point past the crossing is faster beyond its interval. False: the lever only reaches ×1.00 there (on
    # the H200, Apex BF16 against native: ×0.59-0.68 where the host sets the pace, ×1.00-1.01 where the GPU does).
    pays: bool = True
    # The fastest point past the crossing, whole: how much "pays" pays. Its interval and place are said with it, so
    # a 1% gain (call 29's Apex map: ×1.01 (1.00–1.02) at batch 32) does not read like a 4× one. None: older files.
    best: Estimate | None = None
    predicted_only: bool = False  # no point of its line ran end to end: the crossing is the predictor's alone
    fixed: str = ""               # the other axis's value on a map's line ("width=768"); "" on a one-axis sweep

    @property
    def located(self) -> bool:
        """False where the crossing's interval spans every swept value: its bounds' curves never cross ×1.00."""
        return self.low is not None or self.high is not None

    @property
    def text(self) -> str:
        """What a reader is told first comes first: whether any point was measured, then where the speedup crosses
        ×1.00 (or that no interval can place it), then how much the lever pays past it, its best point whole."""
        # a decimal more where a bound would read as the crossing itself: call 29's 15.99 (15.58–25.49) read
        # "16 (16–25)", as if the crossing sat on its own bound
        bounds = [b for b in (self.low, self.high) if b is not None]
        d = 1 if any(f"{b:,.0f}" == f"{self.value:,.0f}" and b != self.value for b in bounds) else 0
        # a bound past the swept values is open: "at most 1,608" ("(below the range–1,608)" read oddly, a new
        # user's pass)
        if not self.located:
            span = "(not located: its interval spans every swept value)"
        elif self.low is None:
            span = f"(at most {_number(self.high or 0.0, d)})"
        elif self.high is None:
            span = f"(at least {_number(self.low, d)})"
        else:
            span = f"({_number(self.low, d)}–{_number(self.high, d)})"
        where = f"{self.axis} ≈ {self.value:,.{d}f} {span}" + (f" at {self.fixed}" if self.fixed else "")
        side = "above" if self.direction == Direction.PAYS_ABOVE else "below"
        if self.pays:
            # a predicted best says so: call 25's FP8 map read "×1.44 (1.24–1.68) at best" of a point never run
            said = f"{self.direction.value} {where}" + (
                f": {_said(self.best)} at best{', predicted' if self.best.measured is False else ''}, at "
                f"{self.axis}={self.best.x:,.0f}" if self.best else "")
        else:
            said = f"reaches ×1.00 {side} {where}; no point past it measurably faster"
        # of this line: beside "1 of 8 points measured", "no point measured" read as a contradiction
        line = f"at {self.fixed}" if self.fixed else "on this line"
        return (f"predicted only (no point {line} measured): " if self.predicted_only else "") + said

    def to_dict(self) -> dict:
        return {"axis": self.axis, "value": self.value, "low": self.low, "high": self.high,
                "direction": self.direction.value, "pays": self.pays,
                "best": None if self.best is None else asdict(self.best), "predicted_only": self.predicted_only,
                "fixed": self.fixed}

    @classmethod
    def from_dict(cls, data: dict) -> Crossover:
        best = data.get("best")
        # files before the best point was kept whole held its speedup alone; its interval and place are not known
        best = Estimate(**best) if isinstance(best, dict) else None
        return cls(data["axis"], data["value"], data.get("low"), data.get("high"), Direction(data["direction"]),
                   bool(data.get("pays", True)), best, bool(data.get("predicted_only", False)), data.get("fixed", ""))


def _number(x: float, decimals: int) -> str:
    """An axis value: a swept one (a whole number) as it was swept, "8" and not "8.0"."""
    return f"{x:,.0f}" if x == round(x) else f"{x:,.{decimals}f}"


def speedup_text(speedup: float, low: float, high: float) -> str:
    """A speedup with its 95% interval, as every view writes it. A prediction from older files kept no host rounds,
    so a launch-bound one has no spread: "(0.75–0.75)" would read as certainty."""
    # a bound that is not 1 but rounds to 1.00 gets a third digit: call 29's ×1.01 (1.00–1.02), faster beyond
    # its interval, read as a tie
    d = 3 if any(v != 1 and f"{v:.2f}" == "1.00" for v in (low, high)) else 2
    spread = "no spread measured" if low == high else f"{low:.{d}f}–{high:.{d}f}"
    return f"×{speedup:.{d}f} ({spread})"


def _said(e: Estimate) -> str:
    return speedup_text(e.speedup, e.low, e.high)


def _crossings(xs: list[float], ys: list[float]) -> list[tuple[float, Direction]]:
    """Every place a piecewise-linear y(log x) crosses zero, with the sign it changes to."""
    out = []
    for (x1, y1), (x2, y2) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=False):
        if y1 == 0:
            out.append((x1, Direction.PAYS_ABOVE if y2 > 0 else Direction.PAYS_BELOW))
        elif y1 * y2 < 0:
            lx = math.log(x1) + (0 - y1) * (math.log(x2) - math.log(x1)) / (y2 - y1)
            out.append((math.exp(lx), Direction.PAYS_ABOVE if y2 > 0 else Direction.PAYS_BELOW))
    if ys and ys[-1] == 0 and len(ys) > 1:
        out.append((xs[-1], Direction.PAYS_ABOVE if ys[-2] < 0 else Direction.PAYS_BELOW))
    return out


def crossover(axis: str, points: list[Estimate]) -> Crossover | None:
    """The first crossing of ×1.00 along the axis, or None where every point is on one side. Its interval: the
    curve of upper bounds crosses ×1.00 earlier (for a lever that pays above) and the curve of lower bounds later;
    a bound curve that never crosses inside the swept values leaves that side open (None)."""
    pts = sorted(points, key=lambda p: p.x)
    xs = [p.x for p in pts]
    found = _crossings(xs, [math.log(p.speedup) for p in pts])
    if not found:
        return _reached(axis, pts)
    value, direction = found[0]
    ups = _crossings(xs, [math.log(p.high) for p in pts])
    downs = _crossings(xs, [math.log(p.low) for p in pts])
    near_up = min((x for x, _ in ups), key=lambda x: abs(math.log(x / value)), default=None)
    near_down = min((x for x, _ in downs), key=lambda x: abs(math.log(x / value)), default=None)
    # paying above: the optimistic (upper) curve crosses first, so it bounds the crossing from below
    low, high = (near_up, near_down) if direction == Direction.PAYS_ABOVE else (near_down, near_up)
    if low is not None and low > value:
        low = None
    if high is not None and high < value:
        high = None
    # Between two swept values the line is an assumption, not a measurement: the interval spans at least the two
    # that bracket the crossing. Call 33's ×0.75 at batch 4 and ×1.005 (1.005–1.006) at 8 read "≈ 7.9 (7.8–7.9)",
    # where the step turns from the host's pace to the GPU's somewhere between 4 and 8.
    below, above = max(x for x in xs if x <= value), min(x for x in xs if x >= value)
    low = None if low is None else min(low, below)
    high = None if high is None else max(high, above)
    past = [p for p in pts if (p.x > value if direction == Direction.PAYS_ABOVE else p.x < value)]
    return Crossover(axis, value, low, high, direction, pays=any(p.low > 1.0 for p in past),
                     best=max(past, key=lambda p: p.speedup, default=None))


def _reached(axis: str, pts: list[Estimate]) -> Crossover | None:
    """A line that stays below ×1.00 but whose intervals come to hold it: where its upper bounds cross ×1.00, between
    the two swept values around that. Call 32's Apex map at width 768 (×0.79 at batch 8, then ×1.000 (0.996–1.004)
    and ×1.00 (0.99–1.01)) had read "no crossover", beside cells reading ×1.00. None where the intervals never
    reach it, or where the line lies above ×1.00 (a lever that pays at every swept value)."""
    if not pts or any(p.speedup >= 1.0 for p in pts):
        return None
    crossed = _crossings([p.x for p in pts], [math.log(p.high) for p in pts])
    if not crossed:
        return None
    value, direction = crossed[0]
    xs = [p.x for p in pts]
    below, above = max(x for x in xs if x <= value), min(x for x in xs if x >= value)
    return Crossover(axis, value, below, above, direction, pays=False)
