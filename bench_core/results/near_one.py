"""How many decimals a speedup and its 95% interval are written with: one count for every figure of a sentence,
so the sweep's views and the ladder's contribution words agree. Two, except near ×1.00, where two decimals
contradict the words beside them ("×1.00 (slower; 95% CI ×1.00–1.00)", "missed: measured ×1.01, predicted ×1.01
(1.01–1.02)").
"""
from __future__ import annotations

NEAR_ONE = (0.98, 1.02)   # an interval inside this band is written with a third decimal


def speedup_decimals(low: float, high: float, *outside: float) -> int:
    """3 where the interval lies within ×0.98–1.02, where a bound other than 1 would print as 1.00 (faster or slower
    beyond its interval read as a tie), or where a figure said beside it and lying outside it (a measurement the
    prediction missed) would print inside it; else 2."""
    if NEAR_ONE[0] <= low and high <= NEAR_ONE[1]:
        return 3
    if any(v != 1 and f"{v:.2f}" == "1.00" for v in (low, high)):
        return 3
    printed = (float(f"{low:.2f}"), float(f"{high:.2f}"))
    return 3 if any(not low <= v <= high and printed[0] <= float(f"{v:.2f}") <= printed[1] for v in outside) else 2


def times(value: float, decimals: int) -> str:
    """×1.005: a speedup as every view writes it, with the decimals `speedup_decimals` chose for its sentence."""
    return f"×{value:.{decimals}f}"
