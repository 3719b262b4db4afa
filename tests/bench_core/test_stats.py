import random
import statistics
import time

import pytest

from bench_core.measure.stats import (
    NOISE_REPEATS,
    NOISE_SPREAD,
    TimingStats,
    bootstrap_speedup_ci,
    noise_reason,
    quantile,
    timing_stats,
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


def test_noise_boundary_is_not_noisy():
    # exactly at the limit: p10 95, p90 105 around a median of 100 is a spread of exactly 10%
    assert (105.0 - 95.0) / 100.0 == NOISE_SPREAD
    assert noise_reason([95.0 - 10 / 8, 100.0, 105.0 + 10 / 8], None) is None
    assert noise_reason([95.0 - 10 / 8 - 0.01, 100.0, 105.0 + 10 / 8 + 0.01], None) is not None
    # repeats: 3 / 100 is exactly the 3% limit; a hair more is noisy
    assert 3.0 / 100.0 == NOISE_REPEATS
    assert noise_reason([100.0], [100.0, 100.0, 103.0]) is None
    assert noise_reason([100.0], [100.0, 100.0, 103.01]) == "repeat medians differ by 3.0% (limit 3%)"


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
