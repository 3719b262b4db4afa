"""The crossover (sweep.core.crossover) on synthetic lines with a known answer: its value, its interval, its words,
and a crossing labelled predicted whenever a point it rests on is predicted (a measured interval holds its own
noise only, a predicted one the predictor's spread only)."""
from dataclasses import replace

import pytest

from bench_core.sweep.core.crossover import Crossover, Direction, Estimate, crossover, speedup_text
from bench_core.sweep.core.records import (
    crossovers,
)
from helpers import tiny_sweep


def _line(f, xs, spread):
    return [Estimate(x, f(x), f(x) / spread, f(x) * spread) for x in xs]


def test_crossover_of_a_known_line_and_its_interval():
    """speedup = w/1000: ×1.00 at 1000; the upper bounds (×1.1) cross at 1000/1.1, the lower ones at 1100. Nothing
    was measured between 500 and 2000, so the interval is never narrower than those two; with points at 950 and
    1050 around the crossing, the bounds' own crossings are the interval."""
    found = crossover("width", _line(lambda w: w / 1000, [250, 500, 2000, 4000], 1.1))
    assert found is not None and found.direction == Direction.PAYS_ABOVE
    assert found.value == pytest.approx(1000)
    assert (found.low, found.high) == (500, 2000)
    # x2, x4 lie above their intervals; the text says how much it pays
    assert found.pays and \
        found.text == "pays above width ≈ 1,000 (500–2,000): ×4.00 (3.64–4.40) at best, at width=4,000"
    assert Crossover.from_dict(found.to_dict()) == found
    dense = crossover("width", _line(lambda w: w / 1000, [250, 950, 1050, 4000], 1.1))
    assert dense is not None and dense.low == pytest.approx(1000 / 1.1) and dense.high == pytest.approx(1100)


def test_a_crossing_between_two_swept_values_spans_them():
    """An H200 Apex map at width 768: ×0.75 (0.69–0.82) at batch 4 and ×1.005 (1.005–1.006) at 8 read
    "≈ 7.9 (7.8–7.9)", as if batch 7 were known not to pay; the step turns from the host's pace to the GPU's
    somewhere between 4 and 8, and nothing between them ran."""
    points = [Estimate(2, 0.63, 0.57, 0.71), Estimate(4, 0.75, 0.69, 0.82), Estimate(8, 1.005, 1.005, 1.006),
              Estimate(16, 1.0, 0.99, 1.01)]
    found = crossover("batch_size", points)
    assert found is not None and 4 < found.value < 8 and (found.low, found.high) == (4, 8)
    assert "batch_size ≈ 7.9 (4–8)" in found.text


def test_a_small_gain_is_said_with_its_interval_and_an_old_file_still_reads():
    """An H200 Apex map at width 768: its batch-32 point ×1.01 is faster beyond its interval, so the lever "pays";
    the sentence carries that point's interval, and the other axis's value comes after the crossing, not inside
    the axis's name. A file from before kept only the best speedup, a bare number: it reads without it."""
    points = [Estimate(8, 0.59, 0.47, 0.69), Estimate(16, 0.997, 0.97, 1.02), Estimate(32, 1.0098, 1.0041, 1.0155)]
    found = crossover("batch_size", points)
    assert found is not None and found.pays
    found = replace(found, fixed="width=768")
    assert found.text.startswith("pays above batch_size ≈ ") and \
        found.text.endswith(" at width=768: ×1.010 (1.004–1.016) at best, at batch_size=32")
    # a best point that was only predicted says so (an FP8 map: ×1.44 at width 4,096, never run)
    guessed = crossover("batch_size", [*points[:2], replace(points[2], measured=False)])
    assert guessed is not None and ": ×1.010 (1.004–1.016) at best, predicted, at batch_size=32" in guessed.text
    assert Crossover.from_dict(guessed.to_dict()) == guessed
    old = {k: v for k, v in found.to_dict().items() if k != "fixed"} | {"axis": "batch_size at width=768",
                                                                        "best": 1.0098}
    assert Crossover.from_dict(old).best is None and "at best" not in Crossover.from_dict(old).text


def test_a_crossing_never_reads_as_sitting_on_its_own_bound():
    """An H200 Apex map's crossing at width 768, 15.99 (15.58–25.49), read "≈ 16 (16–25)": a decimal more where a bound
    rounds to the crossing, none otherwise."""
    near = Crossover("batch_size", 15.985, 15.576, 25.486, Direction.PAYS_ABOVE, pays=False)
    assert "batch_size ≈ 16.0 (15.6–25.5)" in near.text
    assert "batch_size ≈ 19 (8–31)" in replace(near, value=18.88, low=7.72, high=30.72).text
    assert "batch_size ≈ 16.0 (at most 16.4)" in replace(near, low=None, high=16.4).text


def test_a_speedup_without_spread_does_not_read_as_certain():
    """A launch-bound prediction from older files kept no host rounds: its interval is one number, said as such."""
    assert speedup_text(0.75, 0.75, 0.75) == "×0.75 (no spread measured)"
    # a bound that rounds to 1.00 but is not 1 gets a third digit: faster beyond its interval must not read as a tie
    assert speedup_text(1.0098, 1.0041, 1.0155) == "×1.010 (1.004–1.016)"
    assert speedup_text(0.997, 0.97, 1.02) == "×1.00 (0.97–1.02)"
    assert speedup_text(1.0, 1.0, 1.05) == "×1.00 (1.00–1.05)"


def test_a_crossing_no_point_of_its_line_measured_says_so():
    """An H200 FP8 map, predicted only: its crossing at width ≈ 1,846 (1,821–1,914) came from predictions alone,
    its narrow interval the shallow steps' spread, not a measurement's."""
    result = tiny_sweep()
    unmeasured = replace(result, points=tuple(replace(p, measurement=None) for p in result.points))
    assert all(c.predicted_only and c.text.startswith("predicted only (no point on this line measured): ")
               for c in crossovers(unmeasured))
    # on a map, the line is named: beside "1 of 8 points measured" the sweep's other lines may hold that point
    (row,) = crossovers(unmeasured)
    assert replace(row, fixed="batch_size=2").text.startswith("predicted only (no point at batch_size=2 measured): ")
    assert crossovers(unmeasured) and not any(c.predicted_only for c in crossovers(result))


def test_a_lever_that_only_reaches_parity_is_not_said_to_pay():
    """The H200's Apex map at width 768: x0.68 and x0.59 where the host sets the pace, then x1.00 (0.97-1.02)
    and x1.00 (0.99-1.01) where the GPU does. The log-speedup crosses x1.00 between batch 16 and 32, but no point
    past it is faster beyond its interval: the lever stops costing, it does not pay."""
    points = [Estimate(4, 0.68, 0.46, 0.96), Estimate(8, 0.59, 0.47, 0.69), Estimate(16, 0.997, 0.97, 1.02),
              Estimate(32, 1.002, 0.99, 1.01)]
    found = crossover("batch_size", points)
    assert found is not None and found.direction == Direction.PAYS_ABOVE and not found.pays
    assert found.text.startswith("reaches ×1.00 above batch_size ≈ ") and "measurably faster" in found.text
    assert Crossover.from_dict(found.to_dict()) == found


def test_crossover_of_a_lever_that_pays_below():
    found = crossover("batch_size", _line(lambda b: 8 / b, [1, 2, 4, 16, 32], 1.25))
    assert found is not None and found.direction == Direction.PAYS_BELOW
    assert found.value == pytest.approx(8) and (found.low, found.high) == (4, 16)   # bounds 6.4–10, inside them


def test_a_crossing_interval_beyond_the_swept_values_is_open():
    found = crossover("width", _line(lambda w: w / 1000, [500, 2000], 3.0))
    assert found is not None and found.value == pytest.approx(1000)
    assert found.low is None and found.high is None and not found.located
    # an interval open at both ends places the crossing nowhere: the sentence says so instead of a bold "≈ 1,000"
    # and gives it no value: "reaches ×1.00 above batch_size ≈ 12 (not located…)" named a place, the last swept one
    assert found.text.startswith("reaches ×1.00 somewhere along width (not located: its interval spans every swept "
                                 "value)") and "≈" not in found.text
    # one side open: the upper bounds (×1.5) cross at 667; the lower ones (w / 1,500) stay below ×1.00 to 1,400
    half = crossover("width", _line(lambda w: w / 1000, [600, 700, 1200, 1400], 1.5))
    assert half is not None and half.located and half.low == pytest.approx(1000 / 1.5) and half.high is None
    assert "width ≈ 1,000 (at least 667)" in half.text


def test_no_crossover_when_every_point_is_on_one_side():
    assert crossover("width", _line(lambda w: 1 + w / 1000, [256, 512, 1024], 1.05)) is None
    assert crossover("width", _line(lambda w: 0.5, [256, 512, 1024], 1.05)) is None   # intervals short of ×1.00


def test_a_line_below_one_whose_intervals_come_to_hold_it_reaches_one():
    """An H200 Apex map at width 768: ×0.79 (0.65–0.97) at batch 8, then ×0.9997 (0.996–1.004) and ×0.998
    (0.99–1.01); every point below ×1.00, so no point crossed, and the map said "no crossover" beside cells
    reading ×1.00. The upper bounds cross ×1.00 between 8 and 16: it reaches ×1.00 there, and pays nowhere."""
    points = [Estimate(4, 0.72, 0.66, 0.78), Estimate(8, 0.79, 0.65, 0.97), Estimate(16, 0.9997, 0.996, 1.004),
              Estimate(32, 0.998, 0.99, 1.01)]
    found = crossover("batch_size", points)
    assert found is not None and not found.pays and (found.low, found.high) == (8, 16) and 8 < found.value < 16
    assert found.text.startswith("reaches ×1.00 above batch_size ≈ ") and found.text.endswith(
        "(8–16); no point past it measurably faster")


def _measured_line(measured: tuple[bool, ...]) -> list[Estimate]:
    # costs at 256 and 512, pays at 1024 and 2048: crosses between 512 and 1024, its bounds in the same bracket
    figures = ((256, 0.80, 0.78, 0.82), (512, 0.90, 0.88, 0.92), (1024, 1.10, 1.08, 1.12), (2048, 1.20, 1.18, 1.22))
    return [Estimate(x, s, lo, hi, m) for (x, s, lo, hi), m in zip(figures, measured, strict=True)]


def test_a_crossing_beside_measured_points_that_rests_on_a_predicted_one_is_labelled_predicted():
    found = crossover("width", _measured_line((True, True, False, True)))   # 1,024 predicted, the rest measured
    assert found is not None and not found.predicted_only
    assert found.predicted and found.crossings[0].predicted
    assert "(512–1,024), predicted" in found.text


def test_a_crossing_read_between_measured_points_only_is_not_labelled_predicted():
    found = crossover("width", _measured_line((False, True, True, False)))  # predicted points lie outside its bracket
    assert found is not None and not found.predicted
    assert found.text.split(":")[0] == "pays above width ≈ 740 (512–1,024)"   # the best point says its own label


def test_a_line_with_no_point_measured_says_so_once_up_front():
    found = crossover("width", _measured_line((False,) * 4))
    found = found and Crossover(**{**found.__dict__, "predicted_only": True})
    assert found is not None and found.text.startswith("predicted only")
    assert "(512–1,024):" in found.text   # not again beside the crossing


def test_the_label_survives_the_file():
    found = crossover("width", _measured_line((True, True, False, True)))
    assert found is not None and Crossover.from_dict(found.to_dict()) == found
