"""Timing statistics, the noise rule, speedup intervals over processes (a step-level bootstrap within one) and
the adaptive stopping rule of the timed loop. Pure Python (stdlib only)."""
from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum

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


def spread_reason(median: float | None, p10: float | None, p90: float | None) -> str | None:
    """The noise rule's spread half, from the three figures a record keeps (a component row keeps no series):
    noise_reason's own words where the p10-p90 spread is over NOISE_SPREAD of the median; else None."""
    if median is None or p10 is None or p90 is None or median <= 0:
        return None
    spread = (p90 - p10) / median
    return f"p10–p90 spread {_pct(spread)} of the median (limit {NOISE_SPREAD * 100:.0f}%)" \
        if spread > NOISE_SPREAD else None


def noise_reason(times_ms: Sequence[float], round_medians: Sequence[float] | None = None) -> str | None:
    """Why a stage's timing is noisy, in words with the figures; None when it is not.

    A limit reached exactly is not noisy: only a spread or a disagreement beyond it is."""
    reasons = []
    if times_ms:
        spread = spread_reason(statistics.median(times_ms), quantile(times_ms, 0.10), quantile(times_ms, 0.90))
        reasons += [spread] if spread else []
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


# ---------------------------------------------------------------- intervals over processes
class IntervalScope(StrEnum):
    """What a speedup interval covers: the noise between fresh processes, or only the steps inside one."""
    ACROSS_PROCESSES = "across processes"
    WITHIN_ONE_PROCESS = "within one process"
    NOT_RECORDED = "not recorded"   # a file written before intervals said what they cover


@dataclass(frozen=True)
class SpeedupInterval:
    low: float
    high: float
    processes: int          # processes (rounds) per side the interval is computed over
    scope: IntervalScope
    # The point the interval is built around (across processes: exp of the mean per-process log-ratio), so the
    # speedup shown beside the interval always lies inside it; None where the point is the ratio of the medians
    # of all steps (within one process, whose bootstrap resamples around that ratio).
    estimate: float | None = None

    @property
    def text(self) -> str:
        """'across 3 processes', 'within one process': what every view prints beside the interval."""
        if self.scope == IntervalScope.ACROSS_PROCESSES:
            return f"across {self.processes} processes"
        return "scope not recorded" if self.scope == IntervalScope.NOT_RECORDED else str(self.scope)

    def scaled(self, factor: float) -> SpeedupInterval:
        return replace(self, low=self.low * factor, high=self.high * factor,
                       estimate=None if self.estimate is None else self.estimate * factor)


def _t_coverage(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer df: the finite series of Abramowitz & Stegun 26.7.3-4."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2:  # odd
        term, total = math.cos(theta), 0.0
        for k in range(1, (df - 1) // 2 + 1):  # cos, (2/3)cos^3, (2*4)/(3*5)cos^5 ... up to cos^(df-2)
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return 2 / math.pi * (theta + math.sin(theta) * total)
    term, total = 1.0, 0.0
    for k in range(1, df // 2 + 1):  # 1, (1/2)cos^2, (1*3)/(2*4)cos^4 ... up to cos^(df-2)
        total += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return math.sin(theta) * total


@functools.lru_cache(maxsize=4096)   # a pure function of two numbers; processes_needed asks for many df in turn
def t_quantile(level: float, df: int) -> float:
    """The t such that P(|T| <= t) = level (e.g. 12.706 for 0.95 and df 1), by bisection on the exact CDF."""
    if not 0.0 < level < 1.0 or df < 1:
        raise ValueError(f"need 0 < level < 1 and df >= 1, not {level}, {df}")
    lo, hi = 0.0, 1.0
    while _t_coverage(hi, df) < level:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_coverage(mid, df) < level else (lo, mid)
        if hi - lo < 1e-12 * hi:
            break
    return (lo + hi) / 2


def _log_medians(rounds: Sequence[Sequence[float]]) -> list[float] | None:
    medians = [statistics.median(r) for r in rounds]
    return [math.log(m) for m in medians] if all(m > 0 for m in medians) else None


def time_interval(rounds: Sequence[Sequence[float]], level: float = 0.95) -> tuple[float, float, float]:
    """(low, point, high) of one stage's time from its processes' steps: with two processes or more a t-interval on
    the log of their medians (the process the unit, as speedup_interval); within one process the order-statistics
    interval of its median."""
    logs = _log_medians(rounds) if len(rounds) >= 2 else None
    if logs is not None:
        centre = statistics.fmean(logs)
        half = t_quantile(level, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        return math.exp(centre - half), math.exp(centre), math.exp(centre + half)
    steps = [t for r in rounds for t in r] if len(rounds) >= 2 else list(rounds[0])
    low, high = median_interval(steps, level)
    return low, statistics.median(steps), high


def speedup_interval(base_rounds: Sequence[Sequence[float]], stage_rounds: Sequence[Sequence[float]],
                     level: float = 0.95) -> SpeedupInterval | None:
    """The interval of speedup = base ms / stage ms, with the process as the unit of replication.

    Each round of a stage is one fresh worker process, and processes differ by more than their steps' noise
    says (allocator layout, clocks, which kernels the autotuner picked): on the H200, one process gave Liger
    RMSNorm x0.58 (0.58-0.62) and the next x0.99 (0.91-1.06). So with n >= 2 processes a side the interval
    is a t-interval on the per-process log-ratio of medians, with n-1 degrees of freedom:
    d_k = log median(base round k) - log median(stage round k), paired by round (round k of both ran close
    together, so drift they share cancels), exp(mean d +- t(n-1) sd(d) / sqrt(n)). Each d_k already carries
    its median's step noise, so sd(d) holds step and process noise together: the "over processes, then steps"
    hierarchy without resampling. A t-interval, not a bootstrap over the processes: a bootstrap of n = 3 units
    takes their spread as the population's (only 10 distinct resamples) and covers far less than 95%; the
    t-interval is exact for normal log-ratios at any n >= 2, and honest (wide) at n = 2, where one degree of
    freedom gives t = 12.7. With unequal round counts (both >= 2) the sides are not paired: Welch's interval,
    its degrees of freedom rounded down (wider, so still at least the level).

    With one process on a side there is no between-process spread to see: the step-level hierarchical
    bootstrap (`bootstrap_speedup_ci`), labelled "within one process". None when a side has no data.
    """
    base = [list(r) for r in base_rounds if len(r)]
    stage = [list(r) for r in stage_rounds if len(r)]
    if not base or not stage:
        return None
    lb, ls = _log_medians(base), _log_medians(stage)
    if min(len(base), len(stage)) < 2 or lb is None or ls is None:
        within = bootstrap_speedup_ci(base, stage, level=level)
        return SpeedupInterval(within[0], within[1], 1, IntervalScope.WITHIN_ONE_PROCESS) if within else None
    if len(lb) == len(ls):
        ratios = [statistics.median(b) / statistics.median(s) for b, s in zip(base, stage, strict=True)]
        if min(ratios) == max(ratios):  # no spread at all: the ratio itself, not exp(log(ratio)) rounded
            return SpeedupInterval(ratios[0], ratios[0], len(ratios), IntervalScope.ACROSS_PROCESSES, ratios[0])
        d = [b - s for b, s in zip(lb, ls, strict=True)]
        n = len(d)
        centre, half = statistics.fmean(d), t_quantile(level, n - 1) * statistics.stdev(d) / math.sqrt(n)
    else:
        centre, half = _welch(lb, ls, level)
        n = min(len(lb), len(ls))
    return SpeedupInterval(math.exp(centre - half), math.exp(centre + half), n, IntervalScope.ACROSS_PROCESSES,
                           math.exp(centre))


def _welch(lb: Sequence[float], ls: Sequence[float], level: float) -> tuple[float, float]:
    """(centre, half width) of Welch's t-interval on the difference of two groups' mean log-medians, its degrees of
    freedom rounded down (wider, so still at least the level)."""
    vb, vs = statistics.variance(lb) / len(lb), statistics.variance(ls) / len(ls)
    se2 = vb + vs
    df = se2 ** 2 / (vb ** 2 / (len(lb) - 1) + vs ** 2 / (len(ls) - 1)) if se2 > 0 else len(lb) + len(ls) - 2
    return statistics.fmean(lb) - statistics.fmean(ls), t_quantile(level, max(1, math.floor(df))) * math.sqrt(se2)


def unpaired_ratio_interval(base_medians: Sequence[float], stage_medians: Sequence[float],
                            level: float = 0.95) -> SpeedupInterval | None:
    """base / stage from two independent groups of per-process medians (no round pairs them: e.g. a bare loop's
    processes against the engine's), Welch's interval on their log-medians whatever the counts; its processes are
    the smaller group's. None without two positive medians a side."""
    if min(len(base_medians), len(stage_medians)) < 2 or min(*base_medians, *stage_medians) <= 0:
        return None
    lb, ls = [math.log(m) for m in base_medians], [math.log(m) for m in stage_medians]
    centre, half = _welch(lb, ls, level)
    return SpeedupInterval(math.exp(centre - half), math.exp(centre + half), min(len(lb), len(ls)),
                           IntervalScope.ACROSS_PROCESSES, math.exp(centre))


def unpaired_log_sd(*groups: Sequence[float]) -> float | None:
    """The pooled within-group sd of the log of per-process medians (what `unpaired_ratio_interval` widens by);
    None without a group of two."""
    logs = [[math.log(m) for m in g] for g in groups if len(g) >= 2 and min(g) > 0]
    df = sum(len(g) - 1 for g in logs)
    if not df:
        return None
    return math.sqrt(sum((len(g) - 1) * statistics.variance(g) for g in logs) / df)


# ---------------------------------------------------------------- what an interval can tell
# A practical equivalence margin: the stated precision target for a lever's effect is 3%, so an effect known
# to lie within 3% either way of x1.00 is "no measurable effect"; wider, the run cannot tell yet. One convention,
# symmetric on the log scale: the interval must lie inside [1/1.03, 1.03].
EQUIVALENCE = 0.03


class Effect(StrEnum):
    """What a 95% interval of a ratio says about x1.00."""
    MEASURED = "measured"                           # the interval excludes x1.00
    NO_MEASURABLE_EFFECT = "no measurable effect"   # it holds x1.00 and lies within EQUIVALENCE of it
    INCONCLUSIVE = "inconclusive"                   # it holds x1.00 but reaches beyond EQUIVALENCE: can't tell yet


def within_equivalence(low: float, high: float) -> bool:
    """Whether [low, high] lies inside [1/(1+EQUIVALENCE), 1+EQUIVALENCE]: no ratio in it matters."""
    return 1 / (1 + EQUIVALENCE) <= low and high <= 1 + EQUIVALENCE


def effect_of(low: float, high: float) -> Effect:
    """An interval that excludes x1.00 is measured (however small); one inside [1/(1+EQUIVALENCE), 1+EQUIVALENCE]
    that holds it is no measurable effect; any other is inconclusive."""
    if not low <= 1.0 <= high:
        return Effect.MEASURED
    if within_equivalence(low, high):
        return Effect.NO_MEASURABLE_EFFECT
    return Effect.INCONCLUSIVE


def log_ratio_sd(base_rounds: Sequence[Sequence[float]], stage_rounds: Sequence[Sequence[float]]) -> float | None:
    """The sample sd of the per-process log-ratios of medians, paired by round (what `speedup_interval` widens
    by); None without two paired processes with positive medians."""
    base = [list(r) for r in base_rounds if len(r)]
    stage = [list(r) for r in stage_rounds if len(r)]
    lb, ls = _log_medians(base), _log_medians(stage)
    if lb is None or ls is None or len(lb) != len(ls) or len(lb) < 2:
        return None
    return statistics.stdev(b - s for b, s in zip(lb, ls, strict=True))


def processes_needed(sd: float, margin: float = EQUIVALENCE, level: float = 0.95,
                     limit: int = 10_000) -> int | None:
    """The fewest processes a side n >= 2 whose t-interval, at this sd of the per-process log-ratios, lies within
    `margin` either way of its point: t(level, n-1) * sd / sqrt(n) <= log(1 + margin). t falls with n, so the
    first n that holds is the answer; the search starts at the normal approximation's n, which never holds too
    early (z < t). None past `limit`."""
    if sd < 0 or margin <= 0:
        raise ValueError(f"need sd >= 0 and margin > 0, not {sd}, {margin}")
    target = math.log1p(margin)
    z = statistics.NormalDist().inv_cdf((1 + level) / 2)
    n = max(2, math.ceil((z * sd / target) ** 2))
    while n <= limit:
        if t_quantile(level, n - 1) * sd / math.sqrt(n) <= target:
            return n
        n += 1
    return None


# ---------------------------------------------------------------- processes that fall in two groups
# The largest gap between sorted per-process medians against the larger range inside the two groups it leaves.
# For three processes of one population whose spacings are uniform, the larger of the two gaps exceeds k times the
# smaller with probability 2/(k+1) (the split of two Dirichlet(1,1,1) spacings is uniform); k = 2/alpha - 1 keeps a
# false split at alpha = 5% for three processes (a normal population gives less, more processes far less).
SPLIT_FALSE_ALARM = 0.05
SPLIT_GAP = 2 / SPLIT_FALSE_ALARM - 1


@dataclass(frozen=True)
class ProcessSplit:
    """Per-process medians that fall in two groups: each group's medians, sorted."""
    low: tuple[float, ...]
    high: tuple[float, ...]

    @property
    def text(self) -> str:
        """'processes split in two groups: 25.6, 25.7 | 41.3 ms'."""
        d = ms_decimals((*self.low, *self.high))
        return (f"processes split in two groups: {', '.join(f'{m:,.{d}f}' for m in self.low)} | "
                f"{', '.join(f'{m:,.{d}f}' for m in self.high)} ms")


def ms_decimals(values: Sequence[float]) -> int:
    """Decimals that give the smallest of these times three significant digits (25.6, 1.23, 0.123)."""
    smallest = min((v for v in values if v > 0), default=1.0)
    return max(0, 2 - math.floor(math.log10(smallest)))


def process_split(medians: Sequence[float]) -> ProcessSplit | None:
    """Two groups where the largest gap between consecutive sorted medians exceeds SPLIT_GAP times the larger range
    inside the groups it leaves (so the groups' ranges cannot overlap) and is itself beyond NOISE_REPEATS of their
    median (a gap the repeat rule calls steady is no split); None under three processes, where any gap would do."""
    xs = sorted(medians)
    if len(xs) < 3 or xs[0] <= 0:
        return None
    gaps = [b - a for a, b in zip(xs, xs[1:], strict=False)]
    cut = max(range(len(gaps)), key=gaps.__getitem__) + 1
    low, high = xs[:cut], xs[cut:]
    inside = max(low[-1] - low[0], high[-1] - high[0])
    gap = gaps[cut - 1]
    if gap <= SPLIT_GAP * inside or gap <= NOISE_REPEATS * statistics.median(xs):
        return None
    return ProcessSplit(tuple(low), tuple(high))


# ---------------------------------------------------------------- adaptive timing
def median_interval(times_ms: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval of the median from order statistics (the binomial rule, normal approximation):
    ranks n/2 -+ z sqrt(n)/2, clipped to the data."""
    if not times_ms:
        raise ValueError("median interval of no data")
    xs = sorted(times_ms)
    n = len(xs)
    reach = statistics.NormalDist().inv_cdf((1 + level) / 2) * math.sqrt(n) / 2
    lo = max(1, math.floor(n / 2 - reach))        # 1-based ranks
    hi = min(n, math.ceil(1 + n / 2 + reach))
    return xs[lo - 1], xs[hi - 1]


def enough_steps(times_ms: Sequence[float], floor: int, ceiling: int, threshold: float) -> bool:
    """Whether a process may stop timing: never before `floor` steps, always at `ceiling`, and in between once
    the 95% interval of its median step time is within +-threshold of the median.

    After torch.utils.benchmark's adaptive_autorange, which stops once IQR/median < threshold between a
    minimum and a maximum run time. The IQR measures spread, which does not shrink with more steps, so a
    noisy step would always run to the ceiling however well its median is already known; the median's own
    interval shrinks as 1/sqrt(n), so this rule asks what the figure needs: its precision."""
    n = len(times_ms)
    if n >= ceiling:
        return True
    if n < floor:
        return False
    median = statistics.median(times_ms)
    lo, hi = median_interval(times_ms)
    return median > 0 and (hi - lo) / (2 * median) <= threshold
