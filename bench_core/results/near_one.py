"""How many decimals a speedup and its 95% interval are written with: one count for every figure of a sentence,
so the sweep's views and the ladder's contribution words agree. Two, except near ×1.00, where two decimals
contradict the words beside them ("×1.00 (slower; 95% CI ×1.00–1.00)", "missed: measured ×1.01, predicted ×1.01
(1.01–1.02)").
"""
from __future__ import annotations

NEAR_ONE = (0.98, 1.02)   # an interval inside this band is written with a third decimal


MAX_DECIMALS = 4


def speedup_decimals(low: float, high: float, *beside: float) -> int:
    """3 where the interval lies within ×0.98–1.02, or where a bound other than 1 would print as 1.00 (faster or
    slower beyond its interval read as a tie); else 2. Then one more, up to 4, while a figure said beside it would
    print on the wrong side of a bound: one outside it (a measurement the prediction missed) printed inside, or one
    inside it (its own point) printed onto a bound it is not ("×1.02 (1.01–1.02)")."""
    d = 2
    if NEAR_ONE[0] <= low and high <= NEAR_ONE[1]:
        d = 3
    if any(v != 1 and f"{v:.2f}" == "1.00" for v in (low, high)):
        d = 3
    while d < MAX_DECIMALS and not _clear(low, high, beside, d):
        d += 1
    return d


def _clear(low: float, high: float, beside: tuple[float, ...], d: int) -> bool:
    printed = (round(low, d), round(high, d))
    for v in beside:
        shown = round(v, d)
        if not low <= v <= high and printed[0] <= shown <= printed[1]:
            return False
        if low < v < high and shown in printed:
            return False
    return True


def decimals_of(value: float | None, interval: tuple[float, float] | None) -> int:
    """`speedup_decimals` for a figure whose interval may be missing: two without one (one round, the baseline)."""
    if value is None or interval is None:
        return 2
    return speedup_decimals(interval[0], interval[1], value)


def times(value: float, decimals: int) -> str:
    """×1.005: a speedup as every view writes it, with the decimals `speedup_decimals` chose for its sentence."""
    return f"×{value:.{decimals}f}"


def span(low: float, high: float, decimals: int) -> str:
    """1.003–1.008: an interval's bounds, with its sentence's decimals."""
    return f"{low:.{decimals}f}–{high:.{decimals}f}"


def percent(fraction: float, decimals: int) -> str:
    """A speedup's distance from ×1.00 as a percentage, as fine as the speedup beside it: ×0.997 "0.3%", ×0.97
    "3%" (whole percents at two decimals read "costs about 0%" beside a measurable ×0.997). One that rounds to
    nothing says it is under the last digit."""
    places = max(decimals - 2, 0)
    text = f"{abs(fraction):.{places}%}"
    if fraction and float(text[:-1]) == 0:
        return f"<{10.0 ** -places:.{places}f}%"
    return text
