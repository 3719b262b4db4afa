"""A sweep's records (sweep.core.records): the JSON round trip, and a predicted point's interval widened by the
error the measured points showed."""
import math
from dataclasses import replace

import pytest

from bench_core.sweep.core.records import (
    from_json,
    is_sweep_json,
    to_json,
)
from bench_core.sweep.views.rows import csv_rows
from helpers import tiny_sweep


def test_json_round_trip_and_csv_rows():
    result = tiny_sweep()
    text = to_json(result)
    assert is_sweep_json(text) and not is_sweep_json('{"stages": []}') and not is_sweep_json(bytes([255]))
    assert from_json(text) == result
    rows = csv_rows(result)
    assert [r["source"] for r in rows] == ["predicted", "measured", "predicted", "measured"]
    assert rows[1]["speedup"] == 1.0 and rows[1]["predicted_speedup"] == pytest.approx(1.1)
    assert rows[1]["peak_mem_change"] == pytest.approx(-0.3) and rows[0]["peak_mem_change"] is None
    assert rows[1]["memory_source"] == "measured" and rows[1]["predicted_peak_mem_change"] is None


def test_a_predicted_points_interval_takes_in_the_error_the_measured_points_showed():
    """tiny_sweep: points 2 and 4 measured x1.0 and x2.0 against x1.1 and x2.2 predicted, so predictions land 10% off
    (log error ln 1.1 each, its rms ln 1.1). Point 1's prediction x0.55 (0.50-0.60): its own spread as a standard
    error, (ln 0.6 - ln 0.5) / (2 x 1.96), combined with ln 1.1, then 1.96 of that each side."""
    result = tiny_sweep()
    first = result.points[0]
    sigma = math.sqrt(((math.log(0.6) - math.log(0.5)) / (2 * 1.96)) ** 2 + math.log(1.1) ** 2)
    wide = (0.55, 0.55 * math.exp(-1.96 * sigma), 0.55 * math.exp(1.96 * sigma))
    assert result.best_estimate(first) == pytest.approx(wide)          # about 0.45-0.68, not 0.50-0.60
    assert first.estimate == pytest.approx((0.55, 0.5, 0.6))          # the prediction's own, kept
    assert result.best_estimate(result.points[1]) == result.points[1].estimate   # a measured point: its own
    row = csv_rows(result)[0]
    assert (row["speedup_low"], row["predicted_low"]) == (pytest.approx(wide[1]), pytest.approx(0.5))
    # one measured point does not yet say how far predictions land: the prediction's own interval
    one = result.with_point(replace(result.points[3], measurement=None))
    assert one.best_estimate(first) == pytest.approx((0.55, 0.5, 0.6))
