import math
import random
import statistics
import time
from fractions import Fraction

import pytest

from bench_core.measure.stats import (
    EQUIVALENCE,
    NOISE_REPEATS,
    NOISE_SPREAD,
    SPLIT_FALSE_ALARM,
    SPLIT_GAP,
    IntervalScope,
    SpeedupInterval,
    TimingStats,
    bootstrap_speedup_ci,
    enough_steps,
    log_ratio_sd,
    median_interval,
    noise_reason,
    process_split,
    processes_needed,
    quantile,
    speedup_interval,
    t_quantile,
    timing_stats,
    unpaired_log_sd,
    unpaired_ratio_interval,
)


def _rng(seed: int) -> random.Random:
    return random.Random(seed)  # noqa: S311 (test data, not secrets)


def test_quantile_hand_computed():
    data = [4.0, 1.0, 3.0, 2.0]                      # sorted 1 2 3 4; position (n-1)q = 3q
    assert quantile(data, 0.0) == 1.0
    assert quantile(data, 1.0) == 4.0
    assert quantile(data, 0.5) == 2.5                # position 1.5
    assert quantile(data, 0.1) == pytest.approx(1.3)  # position 0.3: 1 + 0.3 * (2 - 1)
    assert quantile(data, 0.9) == pytest.approx(3.7)  # position 2.7: 3 + 0.7 * (4 - 3)
    assert quantile([7.0], 0.9) == 7.0


def test_quantile_matches_statistics_inclusive():
    rng = _rng(3)
    data = [rng.uniform(10, 20) for _ in range(37)]
    deciles = statistics.quantiles(data, n=10, method="inclusive")
    for i, expected in enumerate(deciles, start=1):
        assert quantile(data, i / 10) == pytest.approx(expected)


def test_quantile_rejects_bad_input():
    with pytest.raises(ValueError):
        quantile([], 0.5)
    with pytest.raises(ValueError):
        quantile([1.0], 1.5)


def test_timing_stats_hand_computed():
    s = timing_stats([10.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    assert s.n == 10
    assert s.median_ms == 5.5
    assert s.p10_ms == pytest.approx(1.9)            # position 0.9
    assert s.p90_ms == pytest.approx(9.1)            # position 8.1
    assert s.mean_ms == 5.5
    assert s.std_ms == pytest.approx(statistics.stdev(range(1, 11)))
    assert s.iqr_ms == pytest.approx(7.75 - 3.25)    # positions 6.75 and 2.25
    assert timing_stats([3.0]).std_ms == 0.0
    assert timing_stats([]) == TimingStats(0, None, None, None, None, None, None)
    assert timing_stats([1.0, 2.0]).to_dict()["median_ms"] == 1.5


def test_noise_quiet():
    assert noise_reason([100.0, 101.0, 99.0, 100.5, 99.5], [100.0, 100.5]) is None
    assert noise_reason([], []) is None
    assert noise_reason([100.0], None) is None


def test_noise_spread_only():
    times = [80.0, 90.0, 100.0, 110.0, 130.0]        # p10 84, p90 122, median 100: 38%
    reason = noise_reason(times, [100.0, 100.0])
    assert reason == "p10–p90 spread 38% of the median (limit 10%)"


def test_noise_repeats_only():
    reason = noise_reason([100.0] * 10, [100.0, 104.1])   # 4.1 / median 102.05 = 4.0%
    assert reason == "repeat medians differ by 4.0% (limit 3%)"


def test_noise_both_at_once():
    reason = noise_reason([80.0, 90.0, 100.0, 110.0, 130.0], [95.0, 100.0, 105.0])
    assert reason == ("p10–p90 spread 38% of the median (limit 10%); "
                      "repeat medians differ by 10.0% (limit 3%)")


def _at(limit: float, scale: int = 1) -> tuple[int, int]:
    """(centre, excess) integers whose ratio excess / centre rounds to exactly `limit` in floating point: the
    limit's own shortest decimal as a fraction (float(n / d) is that decimal, correctly rounded), scaled."""
    exact = Fraction(repr(limit))
    return exact.denominator * scale, exact.numerator * scale


def test_a_spread_at_its_limit_is_not_noisy_and_one_beyond_it_is():
    # 11 steps: p10 and p90 fall on the 2nd and 10th sorted values (positions (11 - 1) q = 1 and 9), the median on
    # the 6th; nine at the centre and two above it make a spread of excess / centre, whatever the limit is
    centre, excess = _at(NOISE_SPREAD, scale=10)
    at_limit = [float(centre)] * 9 + [float(centre + excess)] * 2
    deciles = statistics.quantiles(at_limit, n=10, method="inclusive")
    assert (deciles[-1] - deciles[0]) / statistics.median(at_limit) == NOISE_SPREAD
    assert noise_reason(at_limit, None) is None
    beyond = at_limit[:9] + [math.nextafter(centre + excess, math.inf)] * 2
    assert noise_reason(beyond, None).startswith("p10–p90 spread ")


def test_repeats_at_their_limit_are_not_noisy_and_beyond_it_are():
    centre, excess = _at(NOISE_REPEATS, scale=10)
    at_limit = [float(centre), float(centre), float(centre + excess)]
    assert (max(at_limit) - min(at_limit)) / statistics.median(at_limit) == NOISE_REPEATS
    steady = [float(centre)] * 5                    # no spread within the steps: only the repeats can be noisy
    assert noise_reason(steady, at_limit) is None
    beyond = [float(centre), float(centre), math.nextafter(centre + excess, math.inf)]
    assert noise_reason(steady, beyond).startswith("repeat medians differ by ")


def test_bootstrap_constant_samples_degenerate():
    ci = bootstrap_speedup_ci([[10.0] * 30, [10.0] * 30], [[4.0] * 30, [4.0] * 30])
    assert ci == (2.5, 2.5)


def test_bootstrap_exact_halving_gives_two():
    rng = _rng(1)
    base = [[rng.uniform(8, 12) for _ in range(30)] for _ in range(2)]
    stage = [[x / 2 for x in r] for r in base]
    assert bootstrap_speedup_ci(base, stage) == (2.0, 2.0)


def test_bootstrap_noisy_contains_point_and_has_width():
    rng = _rng(2)
    base = [[rng.gauss(20, 1.5) for _ in range(30)] for _ in range(3)]
    stage = [[rng.gauss(10, 1.0) for _ in range(30)] for _ in range(3)]
    point = statistics.median([x for r in base for x in r]) / statistics.median([x for r in stage for x in r])
    lo, hi = bootstrap_speedup_ci(base, stage)
    assert lo < point < hi
    assert hi - lo > 0.01
    assert 1.7 < lo and hi < 2.3


def test_bootstrap_unequal_rounds_and_lengths():
    rng = _rng(4)
    base = [[rng.gauss(20, 1) for _ in range(30)]]
    stage = [[rng.gauss(10, 1) for _ in range(20)] for _ in range(2)]
    lo, hi = bootstrap_speedup_ci(base, stage, level=0.9, resamples=500)
    assert lo < 2.0 < hi


def test_bootstrap_deterministic_with_seed():
    rng = _rng(5)
    base = [[rng.gauss(20, 2) for _ in range(30)] for _ in range(2)]
    stage = [[rng.gauss(15, 2) for _ in range(30)] for _ in range(2)]
    assert bootstrap_speedup_ci(base, stage, seed=7) == bootstrap_speedup_ci(base, stage, seed=7)
    assert bootstrap_speedup_ci(base, stage, seed=7) != bootstrap_speedup_ci(base, stage, seed=8)


def test_bootstrap_no_data():
    assert bootstrap_speedup_ci([], [[1.0]]) is None
    assert bootstrap_speedup_ci([[1.0]], [[]]) is None


def test_bootstrap_fast_enough():
    rng = _rng(6)
    base = [[rng.gauss(20, 2) for _ in range(30)] for _ in range(2)]
    stage = [[rng.gauss(15, 2) for _ in range(30)] for _ in range(2)]
    t0 = time.perf_counter()
    bootstrap_speedup_ci(base, stage, resamples=2000)
    assert time.perf_counter() - t0 < 0.5


# ---------------------------------------------------------------- intervals across processes
@pytest.mark.parametrize("df,expected", [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (10, 2.228), (30, 2.042)])
def test_t_quantile_matches_the_published_table(df, expected):
    assert t_quantile(0.95, df) == pytest.approx(expected, abs=5e-4)


def test_t_quantile_other_levels_and_bad_input():
    assert t_quantile(0.90, 1) == pytest.approx(6.314, abs=5e-4)
    assert t_quantile(0.99, 3) == pytest.approx(5.841, abs=5e-4)
    with pytest.raises(ValueError):
        t_quantile(0.95, 0)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def _experiment(rng, n, ratio=2.0, between=0.03, shared=0.02, step=0.02, steps=30):
    """n processes a side: round k of both sides shares a drift, each process has its own offset (sd `between`,
    in log), each step its own noise. The true speedup is `ratio`."""
    base, stage = [], []
    for _ in range(n):
        drift, ub, us = rng.gauss(0, shared), rng.gauss(0, between), rng.gauss(0, between)
        base.append([100.0 * math.exp(drift + ub + rng.gauss(0, step)) for _ in range(steps)])
        stage.append([100.0 / ratio * math.exp(drift + us + rng.gauss(0, step)) for _ in range(steps)])
    return base, stage


def _coverage(interval, n, experiments, seed=11):
    rng = _rng(seed)
    hits = 0
    for _ in range(experiments):
        low, high = interval(*_experiment(rng, n))
        hits += low <= 2.0 <= high
    return hits / experiments


def _band(experiments, level=0.95):
    """Where an interval of true coverage `level` lands in this many experiments: 3 binomial sd either side."""
    sd = math.sqrt(level * (1 - level) / experiments)
    return level - 3 * sd, level + 3 * sd


@pytest.mark.parametrize("processes", [2, 3, 5])
def test_interval_across_processes_covers_the_true_speedup_95_percent_of_the_time(processes):
    def across(base, stage):
        found = speedup_interval(base, stage)
        assert found.scope == IntervalScope.ACROSS_PROCESSES and found.processes == processes
        return found.low, found.high
    low, high = _band(400)
    assert low <= _coverage(across, processes, 400) <= high


def test_the_old_bootstrap_over_three_processes_misses_the_same_band():
    """What the process-level interval fixes: resampling 3 processes and their steps covers far less than 95%."""
    low, _ = _band(100)
    assert _coverage(lambda b, s: bootstrap_speedup_ci(b, s, resamples=100), 3, 100) < low


def test_one_process_is_labelled_within_one_process():
    rng = _rng(12)
    base, stage = [[rng.gauss(20, 1) for _ in range(30)]], [[rng.gauss(10, 1) for _ in range(30)]]
    found = speedup_interval(base, stage)
    assert found.scope == IntervalScope.WITHIN_ONE_PROCESS and found.processes == 1
    assert found.text == "within one process"
    assert (found.low, found.high) == bootstrap_speedup_ci(base, stage)  # the step-level bootstrap, labelled
    # one process on either side is within one process, whatever the other side has
    assert speedup_interval(base * 3, stage).scope == IntervalScope.WITHIN_ONE_PROCESS


def test_across_processes_is_labelled_with_their_count_and_is_paired_by_round():
    # round k's shared drift (x1, x1.5, x0.8) cancels in the paired log-ratios: every ratio is exactly 2
    base = [[100.0 * f] * 10 for f in (1.0, 1.5, 0.8)]
    stage = [[50.0 * f] * 10 for f in (1.0, 1.5, 0.8)]
    found = speedup_interval(base, stage)
    assert found == SpeedupInterval(2.0, 2.0, 3, IntervalScope.ACROSS_PROCESSES, 2.0)
    assert found.text == "across 3 processes"


def test_hand_computed_t_interval_over_three_processes():
    base = [[100.0] * 5, [100.0] * 5, [100.0] * 5]
    stage = [[50.0] * 5, [40.0] * 5, [62.5] * 5]   # ratios 2, 2.5, 1.6: log-ratios log2 + (0, +a, -a), a=log 1.25
    found = speedup_interval(base, stage)
    a = math.log(1.25)
    half = 4.303 * a / math.sqrt(3)                # sd of (0, a, -a) is a; t(0.95, 2) = 4.303
    assert found.low == pytest.approx(2.0 * math.exp(-half), rel=1e-4)
    assert found.high == pytest.approx(2.0 * math.exp(half), rel=1e-4)
    assert found.estimate == pytest.approx(2.0)    # exp(mean log-ratio): the centre the interval is built around


def test_unequal_round_counts_use_welch_across_the_fewer_processes():
    base = [[100.0] * 5, [104.0] * 5, [96.0] * 5]
    stage = [[50.0] * 5, [51.0] * 5]
    found = speedup_interval(base, stage)
    assert found.scope == IntervalScope.ACROSS_PROCESSES and found.processes == 2
    assert found.low < 100 / 50.5 < found.high


def test_no_data_no_interval_and_scaling_keeps_the_scope():
    assert speedup_interval([], [[1.0]]) is None
    assert speedup_interval([[1.0]], [[]]) is None
    found = SpeedupInterval(1.0, 2.0, 3, IntervalScope.ACROSS_PROCESSES, 1.5).scaled(2)
    assert found == SpeedupInterval(2.0, 4.0, 3, IntervalScope.ACROSS_PROCESSES, 3.0)
    assert SpeedupInterval(1.0, 2.0, 0, IntervalScope.NOT_RECORDED).text == "scope not recorded"


@pytest.mark.parametrize("sizes", [(3, 9), (6, 9), (12, 12)])
def test_two_independent_groups_of_process_medians_cover_their_true_ratio_95_percent_of_the_time(sizes):
    """A bare loop's processes against the engine's: no round pairs them, each process its own offset. Welch's
    interval on the log-medians, its degrees of freedom rounded down: at least 95%, and not far above it."""
    rng, hits, experiments = _rng(21), 0, 400
    for _ in range(experiments):
        base = [40.0 * math.exp(rng.gauss(0, 0.08)) for _ in range(sizes[0])]
        stage = [40.0 / 1.1 * math.exp(rng.gauss(0, 0.08)) for _ in range(sizes[1])]
        found = unpaired_ratio_interval(base, stage)
        assert found.scope == IntervalScope.ACROSS_PROCESSES and found.processes == min(sizes)
        hits += found.low <= 1.1 <= found.high
    low, high = _band(experiments)
    assert low <= hits / experiments <= high


def test_an_unpaired_interval_hand_computed_and_its_pooled_spread():
    base, stage = [100.0, 100.0 * math.e ** 0.1], [50.0, 50.0 * math.e ** -0.1]   # log sd 0.1/sqrt2 in each
    found = unpaired_ratio_interval(base, stage)
    se = math.sqrt(2 * (0.1 ** 2 / 2) / 2)              # each side: variance 0.005 over 2 processes
    df = math.floor(se ** 4 / (2 * (0.1 ** 2 / 2 / 2) ** 2))   # Welch: 2 here
    assert found.estimate == pytest.approx(2.0 * math.exp(0.1))
    assert math.log(found.high / found.estimate) == pytest.approx(t_quantile(0.95, df) * se, rel=1e-9)
    assert unpaired_log_sd(base, stage) == pytest.approx(0.1 / math.sqrt(2), rel=1e-12)
    assert unpaired_ratio_interval([100.0], stage) is None and unpaired_log_sd([1.0], [2.0]) is None


# ---------------------------------------------------------------- adaptive timing
def test_median_interval_ranks_hand_computed():
    # n=10: reach 1.96*sqrt(10)/2 = 3.10, ranks floor(5-3.10)=1 and ceil(6+3.10)=10
    assert median_interval([float(x) for x in range(1, 11)]) == (1.0, 10.0)
    # n=20: reach 4.38, ranks floor(5.62)=5 and ceil(15.38)=16
    assert median_interval([float(x) for x in range(20, 0, -1)]) == (5.0, 16.0)
    with pytest.raises(ValueError):
        median_interval([])


def test_stopping_rule_never_stops_before_the_floor():
    steady = [100.0] * 30
    assert not enough_steps(steady[:9], floor=10, ceiling=30, threshold=0.01)
    assert enough_steps(steady[:10], floor=10, ceiling=30, threshold=0.01)


def test_stopping_rule_always_stops_at_the_ceiling():
    rng = _rng(13)
    wild = [rng.uniform(50, 150) for _ in range(30)]
    assert not enough_steps(wild[:29], floor=10, ceiling=30, threshold=0.01)
    assert enough_steps(wild, floor=10, ceiling=30, threshold=0.01)


def test_stopping_rule_threshold_is_the_medians_half_width():
    # n=10: the interval is the whole range, so the half-width is (max - min) / 2 / median
    exactly = [99.0] + [100.0] * 8 + [101.0]             # half-width 1%: the limit itself stops
    beyond = [98.9] + [100.0] * 8 + [101.0]              # 1.05%: does not
    assert enough_steps(exactly, floor=10, ceiling=100, threshold=0.01)
    assert not enough_steps(beyond, floor=10, ceiling=100, threshold=0.01)


@pytest.mark.parametrize("spread,stops", [(0.01, True), (0.10, False)])
def test_stopping_rule_on_series_of_known_spread(spread, stops):
    """40 steps at the exact quantiles of a normal with sd `spread` of the median: the median's 95% interval is
    about 1.96 * 1.25 * spread / sqrt(40) either side: 0.4% for a 1% spread, 3.9% for 10%."""
    dist = statistics.NormalDist(100.0, 100.0 * spread)
    series = [dist.inv_cdf((i + 0.5) / 40) for i in range(40)]
    assert enough_steps(series, floor=10, ceiling=100, threshold=0.01) is stops


# ---------------------------------------------------------------- what would settle an interval
def _narrow_enough(n, sd, margin=EQUIVALENCE):
    """The rule the solver answers, from the t quantile: t(n-1) sd / sqrt(n) <= log(1 + margin)."""
    return t_quantile(0.95, n - 1) * sd / math.sqrt(n) <= math.log1p(margin)


@pytest.mark.parametrize("sd", [0.001, 0.01, 0.02, 0.05, 0.1, 0.3, 1.0])
def test_processes_needed_is_the_fewest_that_narrow_the_interval_within_the_margin(sd):
    n = processes_needed(sd)
    assert n is not None and n >= 2 and _narrow_enough(n, sd)
    assert n == 2 or not _narrow_enough(n - 1, sd)


def test_processes_needed_at_the_edges():
    assert processes_needed(0.0) == 2                      # no spread: two processes are the least an interval needs
    # an sd whose two-process half-width is exactly the margin: t(1) sd / sqrt(2) = log(1.03)
    edge = math.log1p(EQUIVALENCE) * math.sqrt(2) / t_quantile(0.95, 1)
    assert processes_needed(edge * (1 - 1e-9)) == 2 and processes_needed(edge * (1 + 1e-6)) == 3
    assert processes_needed(100.0, limit=50) is None       # beyond what can be run
    with pytest.raises(ValueError):
        processes_needed(-0.1)


def test_log_ratio_sd_is_the_spread_the_interval_widens_by():
    base, stage = [[100.0] * 4, [110.0] * 4, [90.0] * 4], [[50.0] * 4, [50.0] * 4, [50.0] * 4]
    d = [math.log(100 / 50), math.log(110 / 50), math.log(90 / 50)]
    assert log_ratio_sd(base, stage) == pytest.approx(statistics.stdev(d), rel=1e-12)
    found = speedup_interval(base, stage)
    half = t_quantile(0.95, 2) * statistics.stdev(d) / math.sqrt(3)
    assert math.log(found.high / found.low) / 2 == pytest.approx(half, rel=1e-9)
    assert log_ratio_sd(base[:1], stage[:1]) is None and log_ratio_sd(base, stage[:2]) is None


# ---------------------------------------------------------------- processes in two groups
def test_a_split_of_three_processes_is_said_and_an_even_spread_is_not():
    found = process_split([41.3, 25.6, 25.7])
    assert found is not None and (found.low, found.high) == ((25.6, 25.7), (41.3,))
    assert found.text == "processes split in two groups: 25.6, 25.7 | 41.3 ms"
    assert process_split([25.6, 30.1, 34.8]) is None
    assert process_split([25.6, 41.3]) is None             # two processes: any gap would split them


def test_a_split_needs_its_gap_beyond_the_rule_and_beyond_the_repeat_noise():
    """At the rule's edge: a gap just over SPLIT_GAP × the groups' range splits, just under does not; a gap under
    NOISE_REPEATS of the median is steady however tight the groups."""
    inside = 0.1
    over, under = 100.0 + inside + SPLIT_GAP * inside * 1.01, 100.0 + inside + SPLIT_GAP * inside * 0.99
    assert process_split([100.0, 100.0 + inside, over]) is not None
    assert process_split([100.0, 100.0 + inside, under]) is None
    assert process_split([100.0, 100.0, 100.0 + 100.0 * NOISE_REPEATS * 0.9]) is None


@pytest.mark.parametrize("n", [3, 4, 5])
def test_processes_of_one_population_rarely_split(n):
    """The false-split rate the rule was derived for: at most SPLIT_FALSE_ALARM (plus three binomial sd at this many
    trials) for processes drawn from one normal population, with the noise rule's gap met by a wide spread."""
    rng = _rng(5)
    trials = 4000
    splits = sum(process_split([100.0 * math.exp(rng.gauss(0, 0.2)) for _ in range(n)]) is not None
                 for _ in range(trials))
    assert splits / trials <= SPLIT_FALSE_ALARM + 3 * math.sqrt(SPLIT_FALSE_ALARM * (1 - SPLIT_FALSE_ALARM) / trials)


def test_a_stages_time_interval_is_across_its_processes_from_two_on_and_its_medians_interval_within_one():
    import math
    import statistics

    from bench_core.measure.stats import median_interval, t_quantile, time_interval
    rounds = [[10.0, 10.2, 9.9, 10.1], [11.0, 11.3, 10.8, 11.1], [10.5, 10.4, 10.6, 10.5]]
    logs = [math.log(statistics.median(r)) for r in rounds]
    half = t_quantile(0.95, 2) * statistics.stdev(logs) / math.sqrt(3)
    low, point, high = time_interval(rounds)
    assert point == math.exp(statistics.fmean(logs))
    assert (low, high) == (math.exp(statistics.fmean(logs) - half), math.exp(statistics.fmean(logs) + half))
    assert time_interval(rounds[:1]) == (*median_interval(rounds[0])[:1], statistics.median(rounds[0]),
                                         median_interval(rounds[0])[1])
