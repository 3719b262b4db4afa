"""Timing statistics, the noise rule and a bootstrap interval for speedups. Pure Python (stdlib only)."""
from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

# A stage is noisy when its p10-p90 spread is over 10% of its median, or when the medians of its
# repeats (separate rounds of timed steps) disagree by more than 3% of their median.
NOISE_SPREAD = 0.10
NOISE_REPEATS = 0.03


def quantile(data: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks: the rule of statistics.quantiles(method="inclusive")
    (and numpy's default), for any q in [0, 1]."""
    if not data:
        raise ValueError("quantile of no data")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], not {q}")
    xs = sorted(data)
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])


@dataclass(frozen=True)
class TimingStats:
    n: int
    median_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    mean_ms: float | None
    std_ms: float | None
    iqr_ms: float | None

    def to_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def timing_stats(times_ms: Sequence[float]) -> TimingStats:
    """Median, p10, p90, mean, sample standard deviation (0 for one sample) and interquartile range."""
    n = len(times_ms)
    if n == 0:
        return TimingStats(0, None, None, None, None, None, None)
    xs = sorted(times_ms)
    return TimingStats(n=n, median_ms=statistics.median(xs), p10_ms=quantile(xs, 0.10), p90_ms=quantile(xs, 0.90),
                       mean_ms=statistics.fmean(xs), std_ms=statistics.stdev(xs) if n > 1 else 0.0,
                       iqr_ms=quantile(xs, 0.75) - quantile(xs, 0.25))


def _pct(fraction: float) -> str:
    """28% for large figures; one decimal below 20%, so a figure just over a limit does not print as the limit."""
    value = fraction * 100
    return f"{value:.0f}%" if value >= 20 else f"{value:.1f}%"


def noise_reason(times_ms: Sequence[float], round_medians: Sequence[float] | None = None) -> str | None:
    """Why a stage's timing is noisy, in words with the figures; None when it is not.

    A limit reached exactly is not noisy: only a spread or a disagreement beyond it is."""
    reasons = []
    median = statistics.median(times_ms) if times_ms else 0.0
    if median > 0:
        spread = (quantile(times_ms, 0.90) - quantile(times_ms, 0.10)) / median
        if spread > NOISE_SPREAD:
            reasons.append(f"p10–p90 spread {_pct(spread)} of the median (limit {NOISE_SPREAD * 100:.0f}%)")
    medians = [m for m in (round_medians or ()) if m is not None]
    if len(medians) >= 2:
        centre = statistics.median(medians)
        if centre > 0:
            disagreement = (max(medians) - min(medians)) / centre
            if disagreement > NOISE_REPEATS:
                reasons.append(f"repeat medians differ by {_pct(disagreement)} (limit {NOISE_REPEATS * 100:.0f}%)")
    return "; ".join(reasons) or None


def _pick_rounds(rng: random.Random, n: int) -> list[int]:
    return [0] if n == 1 else [rng.randrange(n) for _ in range(n)]


def bootstrap_speedup_ci(base_rounds: Sequence[Sequence[float]], stage_rounds: Sequence[Sequence[float]],
                         level: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """Percentile interval of speedup = median(base ms) / median(stage ms), by a hierarchical bootstrap.

    Each resample draws rounds with replacement (when there is more than one), then iterations with
    replacement within each drawn round, pools them and takes the ratio of the two medians. Rounds are
    drawn at the same indices for both sides when they have as many rounds (repeat k of the baseline and
    of the stage ran close together, under the same machine state), and iterations at the same indices
    when the two drawn rounds are as long (same position in the timed loop: warm-up drift is shared).
    With no such structure in the data this pairing changes nothing; with it, the interval is not widened
    by drift both sides share. Deterministic for a given seed. None when either side has no data.
    """
    base = [list(r) for r in base_rounds if len(r)]
    stage = [list(r) for r in stage_rounds if len(r)]
    if not base or not stage:
        return None
    rng = random.Random(seed)  # noqa: S311 (statistics, not cryptography)
    paired = len(base) == len(stage)
    ratios = []
    for _ in range(resamples):
        pick_b = _pick_rounds(rng, len(base))
        pick_s = pick_b if paired else _pick_rounds(rng, len(stage))
        pooled_b: list[float] = []
        pooled_s: list[float] = []
        for k, rb in enumerate(pick_b):
            b = base[rb]
            idx = rng.choices(range(len(b)), k=len(b))
            pooled_b.extend(b[j] for j in idx)
            if paired:
                s = stage[pick_s[k]]
                pooled_s.extend([s[j] for j in idx] if len(s) == len(b) else rng.choices(s, k=len(s)))
        if not paired:
            for rs in pick_s:
                pooled_s.extend(rng.choices(stage[rs], k=len(stage[rs])))
        ms = statistics.median(pooled_s)
        if ms > 0:
            ratios.append(statistics.median(pooled_b) / ms)
    if not ratios:
        return None
    ratios.sort()
    tail = (1.0 - level) / 2
    return quantile(ratios, tail), quantile(ratios, 1.0 - tail)
