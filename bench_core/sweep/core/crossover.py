"""Where a speedup crosses ×1.00 along one axis: log-speedup interpolated linearly against the log of the axis
value between the two neighbouring points whose speedups lie on either side, and the crossing's interval from the
points' own intervals (the crossing of the upper bounds and of the lower bounds), never narrower than the two swept
values around it (nothing between them was measured). A line may cross back: every crossing where the points'
intervals change their reading (pays, costs, no measurable difference, can't tell yet) is kept and said. Pure
arithmetic, no torch.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from enum import StrEnum

from bench_core.measure.stats import Effect, effect_of
from bench_core.results.near_one import span, speedup_decimals, times


class Direction(StrEnum):
    PAYS_ABOVE = "pays above"    # slower below the crossing, faster above it
    PAYS_BELOW = "pays below"


class Verdict(StrEnum):
    """A point read from its 95% interval alone."""
    PAYS = "pays"                          # the interval lies above ×1.00
    COSTS = "costs"                        # below it
    EVEN = "no measurable difference"      # it holds ×1.00 and lies within EQUIVALENCE of it
    UNSURE = "can't tell yet"              # it holds ×1.00 but reaches past EQUIVALENCE (measure.stats.Effect)


class Change(StrEnum):
    """What a later crossing says, as its words read along the axis (the first crossing's are Crossover's)."""
    STOPS_PAYING = "stops paying above"
    SLOWER = "is slower above"
    PAYS = "pays above"                    # the first paying stretch, after one that only reached ×1.00
    PAYS_AGAIN = "pays again above"
    REACHES_AGAIN = "reaches ×1.00 again above"


@dataclass(frozen=True)
class Estimate:
    """One point of a line: the axis value, the speedup and its 95% interval (low, high), and whether it was
    measured end to end (None: not known, older files)."""
    x: float
    speedup: float
    low: float
    high: float
    measured: bool | None = None

    @property
    def verdict(self) -> Verdict:
        """The engine's three outcomes (measure.stats.effect_of), the measured one split by its side of ×1.00."""
        effect = effect_of(self.low, self.high)
        if effect == Effect.MEASURED:
            return Verdict.PAYS if self.low > 1 else Verdict.COSTS
        return Verdict.EVEN if effect == Effect.NO_MEASURABLE_EFFECT else Verdict.UNSURE


@dataclass(frozen=True)
class Crossing:
    """One place the line crosses ×1.00, its interval (None: that side lies beyond the points), and for a later
    crossing what the line does past it."""
    value: float
    low: float | None
    high: float | None
    direction: Direction
    change: Change | None = None
    # It rests on a predicted point: one of the points its value or interval was read between was not run end to
    # end. A measured figure's interval holds only its own noise; a predicted one's, only the predictor's spread.
    predicted: bool = False

    @property
    def located(self) -> bool:
        return self.low is not None or self.high is not None

    @classmethod
    def from_dict(cls, data: dict) -> Crossing:
        change = data.get("change")
        return cls(data["value"], data.get("low"), data.get("high"), Direction(data["direction"]),
                   Change(change) if change else None, bool(data.get("predicted", False)))


@dataclass(frozen=True)
class Crossover:
    axis: str
    value: float                 # the axis value where the speedup is ×1.00
    low: float | None            # its interval; None: that side lies beyond the swept values
    high: float | None
    direction: Direction
    # Some point past the crossing (up to a later one) is faster beyond its interval. False: the lever only
    # reaches ×1.00 there (on the H200, Apex BF16 against native: ×0.59-0.68 where the host sets the pace,
    # ×1.00-1.01 where the GPU does).
    pays: bool = True
    # The fastest point of the line where some point pays, whole: how much "pays" pays. Its interval and place are
    # said with it, so a 1% gain (×1.01 (1.00–1.02)) does not read like a 4× one.
    best: Estimate | None = None
    predicted_only: bool = False  # no point of its line ran end to end: the crossing is the predictor's alone
    fixed: str = ""               # the other axis's value on a map's line ("width=768"); "" on a one-axis sweep
    # Where the line crosses back, and on: an Apex map once read "pays above batch ≈ 7.9" though batch 16 and 32
    # no longer paid (×0.9997), an FLCE map "pays above vocab ≈ 36,450" though 128,256 measured ×0.92.
    later: tuple[Crossing, ...] = ()
    ran: tuple[float, float] | None = None   # the first and last axis values with a figure (None: older files)
    unrun: tuple[float, ...] = ()            # swept values of the line with no figure (a cancelled sweep's)
    predicted: bool = False                  # the first crossing rests on a predicted point (Crossing.predicted)

    @property
    def located(self) -> bool:
        """False where the crossing's interval spans every swept value: its bounds' curves never cross ×1.00."""
        return self.low is not None or self.high is not None

    @property
    def crossings(self) -> tuple[Crossing, ...]:
        return (Crossing(self.value, self.low, self.high, self.direction, predicted=self.predicted), *self.later)

    @property
    def shaded(self) -> tuple[tuple[float, float], ...]:
        """Each crossing's interval as drawn: an open side ends at the last point with a figure, never across
        swept values that have none (a cancelled sweep's map shaded points that never ran)."""
        ends = self.ran or (self.value, self.value)
        return tuple((c.low if c.low is not None else min(ends[0], c.value),
                      c.high if c.high is not None else max(ends[1], c.value)) for c in self.crossings)

    def _beyond(self, above: bool) -> bool:
        """Swept values without a figure lie past the points that have one, on that side."""
        if self.ran is None:
            return False
        return any(u > self.ran[1] if above else u < self.ran[0] for u in self.unrun)

    def _at(self, c: Crossing) -> str:
        """"≈ 7.9 (4–8)": a crossing's value and its interval."""
        # a decimal more where a bound would read as the crossing itself: 15.99 (15.58–25.49) read
        # "16 (16–25)", as if the crossing sat on its own bound
        bounds = [b for b in (c.low, c.high) if b is not None]
        d = 1 if any(f"{b:,.0f}" == f"{c.value:,.0f}" and b != c.value for b in bounds) else 0
        # a bound past the swept values is open: "at most 1,608" ("(below the range–1,608)" read oddly, a new
        # user's pass); past the points with a figure, it says so, not claiming the values that never ran
        beyond = ", its other end beyond the last point with a figure"
        if c.low is None and c.high is None:   # no value: "≈ 12" beside "not located" read as a place
            every = "point with a figure" if self._beyond(False) or self._beyond(True) else "swept value"
            return f"(not located: its interval spans every {every})"
        elif c.low is None:
            span = f"(at most {_number(c.high or 0.0, d)}{beyond if self._beyond(False) else ''})"
        elif c.high is None:
            span = f"(at least {_number(c.low, d)}{beyond if self._beyond(True) else ''})"
        else:
            span = f"({_number(c.low, d)}–{_number(c.high, d)})"
        # a line with no point measured says so once, up front; a crossing beside measured points says it here
        label = ", predicted" if c.predicted and not self.predicted_only else ""
        return f"≈ {_shown(c.value, c.low, c.high, d)} {span}{label}"

    @property
    def text(self) -> str:
        """What a reader is told first comes first: whether any point was measured, then where the speedup crosses
        ×1.00 (or that no interval can place it), and where it crosses back, then how much the lever pays, its
        best point whole. Every view writes a crossover with this."""
        where = f"{self.axis} {self._at(self.crossings[0])}"
        side = "above" if self.direction == Direction.PAYS_ABOVE else "below"
        first = f"{self.direction.value} {where}" if self.pays else f"reaches ×1.00 {side} {where}"
        if not self.located:   # never a value, nor a side of one: "above batch_size ≈ 12" named a place
            first = f"{'pays' if self.pays else 'reaches ×1.00'} somewhere along {where}"
        back = "".join(f", and {c.change or c.direction} {'' if c.located else 'somewhere '}{self._at(c)}"
                       for c in self.later)
        said = first + back + (f" at {self.fixed}" if self.fixed else "")
        if self.pays or any(c.change in (Change.PAYS, Change.PAYS_AGAIN) for c in self.later):
            # a predicted best says so: a map read "×1.44 (1.24–1.68) at best" of a point never run
            said += (f": {_said(self.best)} at best{', predicted' if self.best.measured is False else ''}, at "
                     f"{self.axis}={self.best.x:,.0f}" if self.best else "")
        else:
            said += "; no point past it measurably faster" if not self.later else "; no point measurably faster"
        # of this line: beside "1 of 8 points measured", "no point measured" read as a contradiction
        line = f"at {self.fixed}" if self.fixed else "on this line"
        return (f"predicted only (no point {line} measured): " if self.predicted_only else "") + said

    def to_dict(self) -> dict:
        return {"axis": self.axis, "value": self.value, "low": self.low, "high": self.high,
                "direction": self.direction.value, "pays": self.pays,
                "best": None if self.best is None else asdict(self.best), "predicted_only": self.predicted_only,
                "fixed": self.fixed, "later": [asdict(c) for c in self.later],
                "ran": None if self.ran is None else list(self.ran), "unrun": list(self.unrun),
                "predicted": self.predicted}

    @classmethod
    def from_dict(cls, data: dict) -> Crossover:
        best = data.get("best")
        # files before the best point was kept whole held its speedup alone; its interval and place are not known
        best = Estimate(**best) if isinstance(best, dict) else None
        ran = data.get("ran")
        return cls(data["axis"], data["value"], data.get("low"), data.get("high"), Direction(data["direction"]),
                   bool(data.get("pays", True)), best, bool(data.get("predicted_only", False)), data.get("fixed", ""),
                   tuple(Crossing.from_dict(c) for c in data.get("later") or ()),
                   None if ran is None else (ran[0], ran[1]), tuple(data.get("unrun") or ()),
                   bool(data.get("predicted", False)))


def _shown(value: float, low: float | None, high: float | None, decimals: int) -> str:
    """A crossing's value to the step its interval can tell: a tenth of the interval's width, down to a unit (two
    significant figures where it has none). Unrounded, an FLCE line read "≈ 57,062 (50,304–128,256)", five figures
    inside an interval 78,000 wide, and another "≈ 39,224 (not located: ...)"."""
    if low is None and high is None:   # not located: two significant figures say as much as it can
        step = 10.0 ** (math.floor(math.log10(abs(value))) - 1) if value else 0.0
    else:
        width = high - low if low is not None and high is not None else abs(value - (high if high is not None
                                                                                      else low or 0.0))
        step = 10.0 ** math.floor(math.log10(width / 10)) if width > 0 else 0.0
    if step >= 10:
        return f"{round(value / step) * step:,.0f}"
    return f"{value:,.{decimals}f}"


def _number(x: float, decimals: int) -> str:
    """An axis value: a swept one (a whole number) as it was swept, "8" and not "8.0"."""
    return f"{x:,.0f}" if x == round(x) else f"{x:,.{decimals}f}"


def speedup_text(speedup: float, low: float, high: float, decimals: int | None = None) -> str:
    """A speedup with its 95% interval, as every view of a sweep writes it, its decimals chosen once for the three
    (results.near_one; `decimals` where the sentence chose them for a figure beside it too). A prediction from
    older files kept no host rounds, so a launch-bound one has no spread: "(0.75–0.75)" would read as certainty."""
    d = speedup_decimals(low, high) if decimals is None else decimals
    spread = "no spread measured" if low == high else span(low, high, d)
    return f"{times(speedup, d)} ({spread})"


def _said(e: Estimate) -> str:
    return speedup_text(e.speedup, e.low, e.high)


def _crossings(xs: list[float], ys: list[float]) -> list[tuple[float, Direction]]:
    """Every place a piecewise-linear y(log x) crosses zero, with the sign it changes to. A run of zeros between
    two signs crosses at its middle; one that only touches zero (the same sign either side) does not cross; a line
    that starts or ends at zero crosses there."""
    out = []
    last: int | None = None   # the last point off zero
    for j, y in enumerate(ys):
        if y == 0:
            continue
        if last is None and j > 0:     # the line starts at zero
            out.append((xs[j - 1], Direction.PAYS_ABOVE if y > 0 else Direction.PAYS_BELOW))
        elif last is not None and (ys[last] > 0) != (y > 0):
            if j == last + 1:
                lx = math.log(xs[last]) + (0 - ys[last]) * (math.log(xs[j]) - math.log(xs[last])) / (y - ys[last])
            else:
                lx = (math.log(xs[last + 1]) + math.log(xs[j - 1])) / 2
            out.append((math.exp(lx), Direction.PAYS_ABOVE if y > 0 else Direction.PAYS_BELOW))
        last = j
    if last is not None and last < len(ys) - 1:   # the line ends at zero
        out.append((xs[last + 1], Direction.PAYS_BELOW if ys[last] > 0 else Direction.PAYS_ABOVE))
    return out


def _bracket(xs: list[float], value: float) -> tuple[float, float]:
    """The two swept values around a crossing: nothing between them was measured."""
    return max(x for x in xs if x <= value), min(x for x in xs if x >= value)


def _interval(value: float, direction: Direction, xs: list[float], ups: list[tuple[float, Direction]],
              downs: list[tuple[float, Direction]]) -> tuple[float | None, float | None]:
    """A crossing's interval: where its bounds' curves cross ×1.00 the same way, nearest on either side (paying
    above, the optimistic upper curve crosses first, so it bounds the crossing from below); a curve that never
    does leaves that side open (None)."""
    early, late = (ups, downs) if direction == Direction.PAYS_ABOVE else (downs, ups)
    low = max((x for x, d in early if d == direction and x <= value), default=None)
    high = min((x for x, d in late if d == direction and x >= value), default=None)
    # Between two swept values the line is an assumption, not a measurement: the interval spans at least the two
    # that bracket the crossing. Else ×0.75 at batch 4 and ×1.005 (1.005–1.006) at 8 read "≈ 7.9 (7.8–7.9)",
    # where the step turns from the host's pace to the GPU's somewhere between 4 and 8.
    below, above = _bracket(xs, value)
    return None if low is None else min(low, below), None if high is None else max(high, above)


def _rests_on_predicted(c: Crossing, pts: list[Estimate]) -> bool:
    """Whether a point the crossing was read from is predicted: the swept values bracketing its interval (an open
    side: every point on that side, whose bound curve never crossed) and all between them."""
    xs = [p.x for p in pts]
    lo = _bracket(xs, c.low)[0] if c.low is not None else xs[0]
    hi = _bracket(xs, c.high)[1] if c.high is not None else xs[-1]
    lo, hi = min(lo, _bracket(xs, c.value)[0]), max(hi, _bracket(xs, c.value)[1])
    return any(p.measured is False for p in pts if lo <= p.x <= hi)


def _labelled(cs: list[Crossing], pts: list[Estimate]) -> list[Crossing]:
    return [replace(c, predicted=_rests_on_predicted(c, pts)) for c in cs]


def _between(pts: list[Estimate], start: float, end: float) -> set[Verdict]:
    return {p.verdict for p in pts if start < p.x < end}


def _changes(found: list[Crossing], pts: list[Estimate]) -> list[Crossing]:
    """The first crossing, then each later one where the points' intervals read differently on its two sides
    (a stretch that paid or a point that costs). A crossing with no measurable difference either side (the point
    speedup dipping under ×1.00 and back, every interval holding it) goes with the one that undoes it. Each kept
    later crossing gets its words."""
    cs = list(found)
    i = 1
    while i < len(cs):
        after_end = cs[i + 1].value if i + 1 < len(cs) else math.inf
        before, after = _between(pts, cs[i - 1].value, cs[i].value), _between(pts, cs[i].value, after_end)
        up = cs[i].direction == Direction.PAYS_ABOVE
        if (Verdict.COSTS in before or Verdict.PAYS in after) if up else \
                (Verdict.PAYS in before or Verdict.COSTS in after):
            i += 1
        else:
            del cs[i:i + 2]
    out = cs[:1]
    for i, c in enumerate(cs[1:], 1):
        after = _between(pts, c.value, cs[i + 1].value if i + 1 < len(cs) else math.inf)
        paid = any(p.verdict == Verdict.PAYS for p in pts if p.x < c.value)
        if c.direction == Direction.PAYS_ABOVE:
            change = (Change.PAYS_AGAIN if paid else Change.PAYS) if Verdict.PAYS in after else Change.REACHES_AGAIN
        else:
            change = Change.SLOWER if Verdict.COSTS in after else Change.STOPS_PAYING
        out.append(replace(c, change=change))
    return out


def crossover(axis: str, points: list[Estimate]) -> Crossover | None:
    """Where the line crosses ×1.00, first and then back, or None where every point is on one side. Each
    crossing's interval: the curve of upper bounds crosses ×1.00 earlier (for a lever that pays above) and the curve
    of lower bounds later; a bound curve that never crosses inside the swept values leaves that side open (None).
    A line below ×1.00 whose intervals come to hold it crosses where its upper bounds do (`_reached`)."""
    pts = sorted(points, key=lambda p: p.x)
    xs = [p.x for p in pts]
    found = _crossings(xs, [math.log(p.speedup) for p in pts])
    if not found:
        return _reached(axis, pts)
    ups = _crossings(xs, [math.log(p.high) for p in pts])
    downs = _crossings(xs, [math.log(p.low) for p in pts])
    kept = _labelled(_changes([Crossing(v, *_interval(v, d, xs, ups, downs), d) for v, d in found], pts), pts)
    first, end = kept[0], kept[1].value if len(kept) > 1 else math.inf
    side = (first.value, end) if first.direction == Direction.PAYS_ABOVE else (-math.inf, first.value)
    return Crossover(axis, first.value, first.low, first.high, first.direction,
                     pays=Verdict.PAYS in _between(pts, *side), best=_best(pts), later=tuple(kept[1:]),
                     ran=(xs[0], xs[-1]), predicted=first.predicted)


def _best(pts: list[Estimate]) -> Estimate | None:
    """The fastest point, where some point pays."""
    return max(pts, key=lambda p: p.speedup) if any(p.verdict == Verdict.PAYS for p in pts) else None


def _reached(axis: str, pts: list[Estimate]) -> Crossover | None:
    """A line that stays below ×1.00 but whose intervals come to hold it: where its upper bounds cross ×1.00, between
    the two swept values around that, and where they cross back (a point slower beyond its interval again). Call
    32's Apex map at width 768 (×0.79 at batch 8, then ×1.000 (0.996–1.004) and ×1.00 (0.99–1.01)) had read "no
    crossover", beside cells reading ×1.00. None where the intervals never reach it, or where the line lies above
    ×1.00 (a lever that pays at every swept value)."""
    if not pts or any(p.speedup >= 1.0 for p in pts):
        return None
    xs = [p.x for p in pts]
    crossed = _crossings(xs, [math.log(p.high) for p in pts])
    if not crossed:
        return None
    kept = _labelled(_changes([Crossing(v, *_bracket(xs, v), d) for v, d in crossed], pts), pts)
    first = kept[0]
    return Crossover(axis, first.value, first.low, first.high, first.direction, pays=False, later=tuple(kept[1:]),
                     ran=(xs[0], xs[-1]), predicted=first.predicted)
